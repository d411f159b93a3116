"""Seasonal-naive baseline forecaster: the next window repeats a past window, plus residual quantiles.

Use :class:`SeasonalNaiveForecaster` as the yardstick in backtests (``jobs.train_forecaster``,
``benchmarks/forecasting/forecasting.py``) and as a dependency-free fallback. Bin ``i`` of the forecast is
the history value one season earlier; with ``season_s=None`` the season is the horizon itself,
so the forecast repeats the last ``horizon`` of history (the classic "last window" baseline).
Quantiles add the empirical quantiles of the fitted series' seasonal differences
``y[t] - y[t - season]``, so they are calibrated on the training data and never cross.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from models.forecasting.base import ForecastingModel
from models.forecasting.series_prep import prepare_rate_series
from models.forecasting.types import DEFAULT_QUANTILES, ForecastInputError, QuantileForecast

__all__ = ["SeasonalNaiveForecaster"]


class SeasonalNaiveForecaster(ForecastingModel):
    """Repeat-the-past forecaster; a :class:`ForecastingModel` that is a yardstick only (never registered).

    ``season_s`` must be a multiple of ``bin_s`` (or None: season = horizon). ``fit`` learns
    residual quantiles for the season it will use; if ``season_s`` is None it learns them for
    ``default_horizon_s``.
    """

    name = "seasonal-naive"
    registrable = False  # the yardstick every learned model must beat; no save/load

    def __init__(
        self,
        *,
        bin_s: int = 60,
        season_s: int | None = None,
        default_horizon_s: int = 600,
        quantiles: tuple[float, ...] = (0.1, *DEFAULT_QUANTILES),
        max_gap_bins: int = 5,
    ) -> None:
        if season_s is not None and (season_s <= 0 or season_s % bin_s):
            raise ValueError(f"season_s must be a positive multiple of bin_s={bin_s}, got {season_s}")
        self.bin_s = int(bin_s)
        self.season_s = season_s
        self.default_horizon_s = int(default_horizon_s)
        self.quantiles = tuple(sorted(quantiles))
        self.max_gap_bins = int(max_gap_bins)
        self._offsets: dict[int, tuple[float, np.ndarray]] = {}

    @property
    def min_fit_bins(self) -> int:
        """One season (of ``default_horizon_s`` when ``season_s`` is None) plus two bins of differences."""
        return self._season_bins(math.ceil(self.default_horizon_s / self.bin_s)) + 2

    def params(self) -> dict:
        """Constructor arguments (JSON-friendly)."""
        return {
            "bin_s": self.bin_s,
            "season_s": self.season_s,
            "default_horizon_s": self.default_horizon_s,
            "quantiles": list(self.quantiles),
            "max_gap_bins": self.max_gap_bins,
        }

    def _season_bins(self, horizon_bins: int) -> int:
        return self.season_s // self.bin_s if self.season_s is not None else horizon_bins

    def _learn(self, values: np.ndarray, season: int) -> tuple[float, np.ndarray]:
        if len(values) <= season:
            raise ForecastInputError(
                f"fit series: history too short for seasonal naive: {len(values)} bins, need more than {season}"
            )
        diff = values[season:] - values[:-season]
        return float(diff.mean()), np.quantile(diff, self.quantiles)

    def fit(self, series: pd.Series) -> SeasonalNaiveForecaster:
        """Learn residual quantiles for the season of ``default_horizon_s``."""
        season = self._season_bins(math.ceil(self.default_horizon_s / self.bin_s))
        prep = prepare_rate_series(
            series, bin_s=self.bin_s, max_gap_bins=self.max_gap_bins, min_bins=self.min_fit_bins, where="fit series"
        )
        self._offsets = {season: self._learn(prep.values.to_numpy(), season)}
        return self

    def predict(self, history: pd.Series, horizon_s: int) -> QuantileForecast:
        """Forecast ``ceil(horizon_s / bin_s)`` bins after the end of ``history``.

        Needs at least one season of history. When not fitted for this season (another horizon
        with ``season_s=None``), the residual quantiles are learned from ``history`` itself.
        """
        if horizon_s <= 0:
            raise ForecastInputError(f"horizon_s must be positive, got {horizon_s}")
        n = math.ceil(horizon_s / self.bin_s)
        season = self._season_bins(n)
        prep = prepare_rate_series(
            history, bin_s=self.bin_s, max_gap_bins=self.max_gap_bins, min_bins=season, where="predict history"
        )
        values = prep.values.to_numpy()
        mean_off, q_off = self._offsets[season] if season in self._offsets else self._learn(values, season)
        # Bin i repeats the value `season` bins before it; beyond one season, repeat cyclically.
        base = np.array([values[len(values) - season + (i % season)] for i in range(n)])
        quantiles = {q: np.maximum(base + q_off[j], 0.0) for j, q in enumerate(self.quantiles)}
        return QuantileForecast(
            start=prep.values.index[-1] + pd.Timedelta(seconds=self.bin_s),
            bin_s=self.bin_s,
            mean=np.maximum(base + mean_off, 0.0),
            quantiles=quantiles,
            model=self.name,
        )
