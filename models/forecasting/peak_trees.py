"""What the two direct peak forecasters share: their quantile levels, boosted quantile trees and forecasts.

Use it from :class:`~models.forecasting.peak_forecaster.DirectPeakForecaster` and
:class:`~models.forecasting.darts_peak.DartsPeakForecaster` (the same idea, hand-written and in
darts): :func:`checked_levels` for the ``quantiles`` argument, :class:`QuantileTrees` for the
scikit-learn ``HistGradientBoostingRegressor`` per level (quantile loss, its settings logged as
params), and :func:`peak_forecasts`, which turns per-origin bin and peak quantiles into
:class:`QuantileForecast` s whose levels never cross and whose peak is never below a bin.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np
import pandas as pd

from models.forecasting.types import QuantileForecast

__all__ = ["QuantileTrees", "checked_levels", "peak_forecasts"]


def checked_levels(quantiles: Iterable[float]) -> tuple[float, ...]:
    """``quantiles`` sorted; ValueError unless all lie in (0, 1) and 0.5 (the forecast's mean) is among them."""
    levels = tuple(sorted(float(q) for q in quantiles))
    if 0.5 not in levels or not all(0 < q < 1 for q in levels):
        raise ValueError(f"quantiles must lie in (0, 1) and include 0.5, got {quantiles!r}")
    return levels


class QuantileTrees:
    """The boosted trees' settings of a forecaster (set by :meth:`_set_trees`; ``seed`` is the model's) and
    one quantile regressor per level from them."""

    max_iter: int
    learning_rate: float
    max_leaf_nodes: int
    min_samples_leaf: int
    seed: int

    def _set_trees(self, max_iter: int, learning_rate: float, max_leaf_nodes: int, min_samples_leaf: int) -> None:
        self.max_iter = int(max_iter)
        self.learning_rate = float(learning_rate)
        self.max_leaf_nodes = int(max_leaf_nodes)
        self.min_samples_leaf = int(min_samples_leaf)

    def _tree_params(self) -> dict[str, Any]:
        """The trees' constructor arguments, as :meth:`params` logs them."""
        return {
            "max_iter": self.max_iter,
            "learning_rate": self.learning_rate,
            "max_leaf_nodes": self.max_leaf_nodes,
            "min_samples_leaf": self.min_samples_leaf,
        }

    def _regressor(self, q: float) -> Any:
        """An unfitted regressor of level ``q``."""
        from sklearn.ensemble import HistGradientBoostingRegressor

        return HistGradientBoostingRegressor(
            loss="quantile", quantile=q, early_stopping=False, random_state=self.seed, **self._tree_params()
        )


def peak_forecasts(
    starts: Sequence[pd.Timestamp],
    bin_s: int,
    levels: Sequence[float],
    bins: np.ndarray,
    peak: np.ndarray | None,
    model: str,
) -> list[QuantileForecast]:
    """One forecast per origin (first bin at ``starts[i]``) from ``bins`` (origins, levels, bins) and
    ``peak`` (origins, levels) in rec/s, or None for a horizon shorter than the trained one.

    Each origin's values are sorted across ``levels`` (ascending) so that they never cross and bins
    are clipped at 0; ``mean`` is the median. A window's max is never below any of its bins: each peak
    level is raised to at least that level's highest bin (then kept non-decreasing across levels).
    """
    bins = np.maximum(np.sort(bins, axis=1), 0.0)
    if peak is not None:
        peak = np.maximum.accumulate(np.maximum(np.sort(peak, axis=1), bins.max(axis=2)), axis=1)
    out = []
    for i, start in enumerate(starts):
        qs = {float(lv): bins[i, j].copy() for j, lv in enumerate(levels)}
        peak_q = {} if peak is None else {float(lv): float(peak[i, j]) for j, lv in enumerate(levels)}
        out.append(
            QuantileForecast(start=start, bin_s=bin_s, mean=qs[0.5].copy(), quantiles=qs, model=model, peak_quantiles=peak_q)
        )
    return out
