"""An equal-weight ensemble of the darts peak models: the quantile-wise mean of their forecasts.

Use :class:`DartsPeakEnsemble` (candidate ``darts-peak-ensemble``) where no single darts peak
model is reliably the best: the linear one extrapolates smooth trends (the real ADS trace), the
boosted trees fit regimes and spikes (the twin's ysb and tsw), and their errors differ in sign and
timing. Averaging two forecasters with different error patterns lowers the variance of the
combined error, and the misses it addresses were variance between spans: a planning rule or a peak
factor chosen on the selection span that did not hold on the report span. The weights are equal,
not fitted: a fitted weight is one more parameter chosen on a 6 h span, the thing that missed.

How forecasts are combined (:func:`combine_forecasts`): level by level, the mean of the members'
per-bin quantiles, of their means and of their ``peak_quantiles`` (quantile averaging, also called
Vincentization: the average of non-decreasing quantile curves is non-decreasing, so the result is
a valid quantile forecast and each planning rule reads it as it reads a member's). Only the levels
every member has are kept.

Why not darts' ``NaiveEnsembleModel``: it averages either the members' point forecasts or, with
``predict_likelihood_parameters``, the parameters of one likelihood all members share. The linear
member is one ``LinearRegressionModel(likelihood="quantile")`` for every level, the tree member is
one deterministic ``SKLearnModel`` per level (scikit-learn's quantile loss, no darts likelihood),
and each member turns its darts output into bins and a peak relative to its own reference rate
(:class:`~models.forecasting.darts_peak.DartsPeakForecaster`). So the members are darts models
and do their own batched ``historical_forecasts``; only the average is written here, on their
finished :class:`~models.forecasting.types.QuantileForecast` objects.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from flinktune.lake.atomic import atomic_dir
from models.forecasting.backtest import BacktestResult, SelectedBacktest, choose_rules, summarize
from models.forecasting.base import ForecastingModel
from models.forecasting.darts_peak import DARTS_PEAK_LEVELS, ESTIMATORS, DartsPeakForecaster
from models.forecasting.types import QuantileForecast

__all__ = ["ENSEMBLE_NAME", "DartsPeakEnsemble", "combine_forecasts", "ensemble_backtest", "member_candidates"]

ENSEMBLE_NAME = "darts-peak-ensemble"


def combine_forecasts(forecasts: Sequence[QuantileForecast], *, model: str = ENSEMBLE_NAME) -> QuantileForecast:
    """The quantile-wise mean of forecasts of the same bins (same ``start``, ``bin_s`` and length).

    Keeps the quantile levels all of them have; ``peak_quantiles`` is averaged when every forecast
    carries it (otherwise left empty, so the peak is read from the averaged bins).
    """
    if not forecasts:
        raise ValueError("combine_forecasts: no forecasts")
    first = forecasts[0]
    for fc in forecasts[1:]:
        if fc.start != first.start or fc.bin_s != first.bin_s or len(fc.mean) != len(first.mean):
            raise ValueError(
                f"combine_forecasts: {fc.model} forecasts {len(fc.mean)} bins of {fc.bin_s}s from "
                f"{fc.start}, {first.model} {len(first.mean)} bins of {first.bin_s}s from {first.start}"
            )
    levels = sorted(set.intersection(*(set(fc.quantiles) for fc in forecasts)))
    quantiles = {q: np.mean([fc.quantiles[q] for fc in forecasts], axis=0) for q in levels}
    peak: dict[float, float] = {}
    if all(fc.peak_quantiles for fc in forecasts):
        peak = {q: float(np.mean([fc.peak_quantiles[q] for fc in forecasts])) for q in levels}
    return QuantileForecast(
        start=first.start,
        bin_s=first.bin_s,
        mean=np.mean([fc.mean for fc in forecasts], axis=0),
        quantiles=quantiles,
        model=model,
        peak_quantiles=peak,
    )


def member_candidates(estimators: Sequence[str] = ESTIMATORS) -> tuple[str, ...]:
    """The candidate names of the ensemble's members (``darts-peak-<estimator>``)."""
    return tuple(f"darts-peak-{e}" for e in estimators)


def ensemble_backtest(members: Sequence[SelectedBacktest], *, max_under_rate: float = 0.05) -> SelectedBacktest:
    """The ensemble's backtest built from its members' backtests on the same spans.

    Use it where the members were backtested anyway (the retraining job, the benchmark's rules
    script): the ensemble fits each member on the same data as the member alone does, so averaging
    their forecasts origin by origin (:func:`combine_forecasts`) is the ensemble's own backtest
    without fitting everything twice. The rules are chosen on the combined selection span as
    :func:`~models.forecasting.backtest.backtest_select_then_report` chooses them; fit and predict
    times are the members' sums.
    """
    if len(members) < 2:
        raise ValueError(f"ensemble_backtest: needs at least two members' backtests, got {len(members)}")

    def combined(part: str) -> BacktestResult:
        results: list[BacktestResult] = [getattr(m, part) for m in members]
        forecasts = [combine_forecasts(list(fcs)) for fcs in zip(*(r.forecasts for r in results), strict=True)]
        return BacktestResult(
            ENSEMBLE_NAME, results[0].window, forecasts, sum(r.fit_s for r in results), sum(r.predict_ms for r in results)
        )

    selection, report = combined("selection"), combined("report")
    rule, peak_rule = choose_rules(selection, max_under_rate)
    return SelectedBacktest(selection, report, summarize(report, rule=rule, peak_rule=peak_rule))


class DartsPeakEnsemble(ForecastingModel):
    """Equal-weight quantile average of :class:`DartsPeakForecaster` members, one per ``estimators`` entry.

    Parameters are the members' shared ones (``bin_s``, ``input_bin_s``, ``default_horizon_s``,
    ``quantiles``, ``max_iter`` (trees only), ``max_gap_bins``, ``seed``; see
    :class:`DartsPeakForecaster`); every member keeps its other defaults. Fitting fits every member on the same series, so fit time is their sum, and so is
    predict time.
    """

    reads_any_resolution = True  # both members read any step (the benchmark passes the 1 s trace)

    def __init__(
        self,
        *,
        estimators: Sequence[str] = ESTIMATORS,
        bin_s: int = 60,
        input_bin_s: int = 10,
        default_horizon_s: int = 600,
        quantiles: Sequence[float] = DARTS_PEAK_LEVELS,
        max_iter: int = 100,
        max_gap_bins: int = 30,
        seed: int = 0,
    ) -> None:
        estimators = tuple(estimators)
        if len(estimators) < 2 or len(set(estimators)) != len(estimators) or not set(estimators) <= set(ESTIMATORS):
            raise ValueError(f"estimators: at least two distinct of {list(ESTIMATORS)}, got {list(estimators)}")
        self.name = ENSEMBLE_NAME
        self.estimators = estimators
        self.bin_s = int(bin_s)
        self.input_bin_s = int(input_bin_s)
        self.default_horizon_s = int(default_horizon_s)
        self.quantiles = tuple(sorted(float(q) for q in quantiles))
        self.max_iter = int(max_iter)
        self.max_gap_bins = int(max_gap_bins)
        self.seed = int(seed)
        self.members = [
            DartsPeakForecaster(
                estimator=e,
                bin_s=bin_s,
                input_bin_s=input_bin_s,
                default_horizon_s=default_horizon_s,
                quantiles=self.quantiles,
                max_iter=max_iter,
                max_gap_bins=max_gap_bins,
                seed=seed,
            )
            for e in estimators
        ]

    @property
    def min_fit_bins(self) -> int:
        return max(m.min_fit_bins for m in self.members)

    @property
    def predict_bins(self) -> int:
        return max(m.predict_bins for m in self.members)

    def fit(self, series: pd.Series) -> DartsPeakEnsemble:
        """Fit every member on ``series``; ForecastInputError as a member raises it."""
        for m in self.members:
            m.fit(series)
        return self

    def predict(self, history: pd.Series, horizon_s: int) -> QuantileForecast:
        """The members' forecasts after ``history``, averaged (:func:`combine_forecasts`)."""
        return combine_forecasts([m.predict(history, horizon_s) for m in self.members])

    def historical_forecasts(self, series: pd.Series, origins: pd.DatetimeIndex, horizon_s: int) -> list[QuantileForecast]:
        """Every member's batched forecasts at ``origins``, averaged origin by origin."""
        per_member = [m.historical_forecasts(series, origins, horizon_s) for m in self.members]
        return [combine_forecasts(fcs) for fcs in zip(*per_member)]

    def params(self) -> dict:
        """Constructor arguments (JSON-friendly)."""
        return {
            "estimators": list(self.estimators),
            "bin_s": self.bin_s,
            "input_bin_s": self.input_bin_s,
            "default_horizon_s": self.default_horizon_s,
            "quantiles": list(self.quantiles),
            "max_iter": self.max_iter,
            "max_gap_bins": self.max_gap_bins,
            "seed": self.seed,
        }

    def save(self, path: str | Path) -> Path:
        """Write every member (``member<i>/``) and ``meta.json`` to directory ``path``, atomically."""
        path = Path(path)
        with atomic_dir(path) as tmp:
            for i, m in enumerate(self.members):
                m.save(tmp / f"member{i}")
            (tmp / "meta.json").write_text(json.dumps({"kind": ENSEMBLE_NAME, "params": self.params()}, indent=2))
        return path

    @classmethod
    def load(cls, path: str | Path, *, device: str = "cpu") -> DartsPeakEnsemble:
        """Restore an ensemble written by :meth:`save` (``device`` is accepted for a uniform interface)."""
        path = Path(path)
        meta = json.loads((path / "meta.json").read_text())
        self = cls(**meta["params"])
        self.members = [DartsPeakForecaster.load(path / f"member{i}") for i in range(len(self.estimators))]
        return self
