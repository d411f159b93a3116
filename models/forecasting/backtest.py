"""Rolling-origin backtests of the 10-minute peak, and the choice of a planning rule by backtest.

Use :func:`run_backtest` to evaluate any forecaster on a :class:`BacktestWindow` (the data window
is what champion/challenger comparisons must share), then :func:`summarize` for the metrics. Darts
models expose ``historical_forecasts(series, origins, horizon_s)`` (darts' batched
``historical_forecasts`` underneath); other forecasters are called once per origin.

Definitions (per origin ``o``; truth = the window series' bin means in ``[o, o + horizon)``):

- ``peak_mae``: mean |forecast peak - true peak|. A model's forecast peak is read from its forecast
  by a peak rule (same forms as planning rules: ``max_mean_x<f>`` or ``quantile:<q>``), chosen
  per model on the selection origins to minimise the absolute error: the highest bin mean of a
  smooth forecast sits systematically below the highest bin of a noisy truth, and every model,
  the Demeter baseline included, gets the same chance to correct for that.
- ``raw_peak_mae``: the same with the plain highest bin mean (no correction).
- ``peak_mase``: ``peak_mae`` over the in-sample MAE of the naive peak forecast "the next window's
  peak equals the last window's", computed on the series before the first origin.
- ``under_rate``: share of origins whose true peak exceeds the planned rate (planning rule).
- ``over_provisioning``: mean of planned rate / true peak.
- ``fit_s``: seconds per fit; ``predict_ms``: median milliseconds of single ``predict`` calls.

The planning rule is chosen on the first ``select_frac`` of the origins (the cheapest rule whose
under-forecast rate is at most ``max_under_rate``) and all metrics are reported on the remaining
origins, so the reported under-forecast rate is out of sample for the choice as well.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np
import pandas as pd

from models.forecasting.planning import planned_rate
from models.forecasting.types import ForecastInputError, QuantileForecast

__all__ = ["BacktestWindow", "BacktestResult", "run_backtest", "summarize", "candidate_rules", "select_rule", "select_peak_rule",
           "PUBLISHED_RULE"]

PUBLISHED_RULE = "max_mean_x1.10"
_FACTORS = (0.9, 0.95, 1.0, 1.05, 1.1, 1.15, 1.2, 1.25, 1.3, 1.4, 1.5, 1.75, 2.0)


@dataclass(frozen=True)
class BacktestWindow:
    """The shared data window: ``series`` in ``bin_s`` bins (regular, UTC), origins from ``start``.

    Origins are every ``stride_bins`` bins from ``start`` while a whole horizon of truth follows.
    """

    series: pd.Series
    start: pd.Timestamp
    horizon_s: int = 600
    stride_bins: int = 1

    def __post_init__(self) -> None:
        idx = self.series.index
        if not isinstance(idx, pd.DatetimeIndex) or idx.freq is None or idx.tz is None:
            raise ForecastInputError("backtest window: series needs a regular tz-aware index (use prepare_rate_series)")
        if self.stride_bins < 1 or self.horizon_s <= 0:
            raise ValueError(f"backtest window: stride_bins >= 1 and horizon_s > 0 needed, got {self.stride_bins}, {self.horizon_s}")
        if not len(self.origins):
            raise ForecastInputError(
                f"backtest window: no origin at or after {pd.Timestamp(self.start).isoformat()} has a whole "
                f"{self.horizon_s}s horizon of truth before {idx[-1].isoformat()}"
            )

    @property
    def bin_s(self) -> int:
        return int(pd.Timedelta(self.series.index.freq).total_seconds())

    @property
    def horizon_bins(self) -> int:
        return math.ceil(self.horizon_s / self.bin_s)

    @property
    def origins(self) -> pd.DatetimeIndex:
        first = int(np.searchsorted(self.series.index, self.start))
        last = len(self.series) - self.horizon_bins
        return self.series.index[first : last + 1 : self.stride_bins]

    @property
    def train(self) -> pd.Series:
        """Everything before the first origin: what a model may be fitted on."""
        return self.series[self.series.index < self.origins[0]]

    def truth_peaks(self) -> np.ndarray:
        values = self.series.to_numpy()
        pos = np.searchsorted(self.series.index, self.origins)
        return np.array([values[p : p + self.horizon_bins].max() for p in pos])

    def naive_peak_scale(self) -> float:
        """In-sample MAE of "next window's peak = last window's peak" on :attr:`train` (MASE scale)."""
        y, n = self.train.to_numpy(), self.horizon_bins
        peaks = np.array([y[i : i + n].max() for i in range(0, len(y) - n + 1)])
        if len(peaks) <= n:
            raise ForecastInputError(f"backtest window: {len(y)} training bins are too few for the MASE scale (need > {2 * n})")
        return float(np.mean(np.abs(peaks[n:] - peaks[:-n])))


@dataclass
class BacktestResult:
    """Forecasts of one model at every origin of a window, plus timings."""

    model: str
    window: BacktestWindow
    forecasts: list[QuantileForecast]
    fit_s: float = float("nan")
    predict_ms: float = float("nan")
    extra: dict[str, Any] = field(default_factory=dict)


def _origin_forecasts(model: Any, window: BacktestWindow, inputs: pd.Series) -> list[QuantileForecast]:
    if hasattr(model, "historical_forecasts") and inputs is window.series:
        return model.historical_forecasts(window.series, window.origins, window.horizon_s)
    return [model.predict(inputs[inputs.index < o], window.horizon_s) for o in window.origins]


def run_backtest(model: Any, window: BacktestWindow, *, inputs: pd.Series | None = None, fit: bool = True,
                 timed_predicts: int = 5) -> BacktestResult:
    """Fit ``model`` on the data before the first origin (unless ``fit=False``) and forecast every origin.

    ``inputs`` is what the model reads (default: the window's binned series); pass a finer series
    (e.g. a 1 s trace for the Demeter baseline) to feed a model its native resolution. Truth always
    comes from the window. ``predict_ms`` is the median of ``timed_predicts`` single predict calls.
    """
    inputs = window.series if inputs is None else inputs
    first = window.origins[0]
    fit_s = float("nan")
    if fit:
        t0 = time.perf_counter()
        model.fit(inputs[inputs.index < first])
        fit_s = time.perf_counter() - t0
    forecasts = _origin_forecasts(model, window, inputs)
    for o, fc in zip(window.origins, forecasts):
        if fc.start != o or len(fc.mean) != window.horizon_bins:
            raise RuntimeError(f"{getattr(model, 'name', model)}: forecast for origin {o} starts {fc.start} with {len(fc.mean)} bins")
    timings = []
    for o in window.origins[-timed_predicts:] if timed_predicts else []:
        history = inputs[inputs.index < o]
        t0 = time.perf_counter()
        model.predict(history, window.horizon_s)
        timings.append(time.perf_counter() - t0)
    predict_ms = float(np.median(timings) * 1000) if timings else float("nan")
    return BacktestResult(getattr(model, "name", type(model).__name__), window, forecasts, fit_s, predict_ms)


def candidate_rules(forecast: QuantileForecast) -> list[str]:
    """Planning rules a forecast supports: max-mean factors and its quantile levels >= 0.5."""
    rules = [f"max_mean_x{f:.2f}" for f in _FACTORS]
    rules += [f"quantile:{q:g}" for q in sorted(forecast.quantiles) if q >= 0.5]
    return rules


def _rule_stats(forecasts: Sequence[QuantileForecast], peaks: np.ndarray, rule: str) -> tuple[float, float]:
    planned = np.array([planned_rate(fc, rule) for fc in forecasts])
    # A relative 1e-9 keeps float round-off (planned == peak) from counting as a miss.
    return float(np.mean(peaks > planned * (1 + 1e-9))), float(np.mean(planned / np.maximum(peaks, 1e-9)))


def select_rule(forecasts: Sequence[QuantileForecast], peaks: np.ndarray, max_under_rate: float = 0.05,
                rules: Sequence[str] | None = None) -> str:
    """The cheapest rule (lowest over-provisioning) with under-forecast rate <= ``max_under_rate``.

    If no rule is that safe, the rule with the lowest under-forecast rate (ties: cheapest).
    """
    rules = list(rules or candidate_rules(forecasts[0]))
    stats = {r: _rule_stats(forecasts, peaks, r) for r in rules}
    safe = [r for r in rules if stats[r][0] <= max_under_rate]
    if safe:
        return min(safe, key=lambda r: stats[r][1])
    return min(rules, key=lambda r: (stats[r][0], stats[r][1]))


def select_peak_rule(forecasts: Sequence[QuantileForecast], peaks: np.ndarray) -> str:
    """The rule whose value is the best point forecast of the peak (lowest mean absolute error)."""
    rules = candidate_rules(forecasts[0])
    errors = {r: float(np.mean(np.abs(np.array([planned_rate(fc, r) for fc in forecasts]) - peaks))) for r in rules}
    return min(rules, key=lambda r: errors[r])


def summarize(result: BacktestResult, *, rule: str | None = None, peak_rule: str | None = None,
              select_frac: float = 1 / 3, max_under_rate: float = 0.05) -> dict[str, Any]:
    """Metrics of ``result`` (module definitions); rules are chosen on the first ``select_frac``.

    Pass both ``rule`` and ``peak_rule`` to skip the choice (all origins are then reported).
    Returns floats plus the ``rule`` and ``peak_rule`` strings.
    """
    window, fcs = result.window, result.forecasts
    peaks = window.truth_peaks()
    if rule is None or peak_rule is None:
        if not 0 < select_frac < 1:
            raise ValueError(f"select_frac must be in (0, 1), got {select_frac}")
        k = max(1, int(len(fcs) * select_frac))
        if k >= len(fcs):
            raise ForecastInputError(f"backtest: {len(fcs)} origins are too few to choose a rule and report on the rest")
        rule = rule or select_rule(fcs[:k], peaks[:k], max_under_rate)
        peak_rule = peak_rule or select_peak_rule(fcs[:k], peaks[:k])
        fcs, peaks = fcs[k:], peaks[k:]
    point = np.array([planned_rate(fc, peak_rule) for fc in fcs])
    mae = float(np.mean(np.abs(point - peaks)))
    raw_mae = float(np.mean(np.abs(np.array([fc.peak(None) for fc in fcs]) - peaks)))
    under, over = _rule_stats(fcs, peaks, rule)
    pub_under, pub_over = _rule_stats(fcs, peaks, PUBLISHED_RULE)
    return {
        "rule": rule,
        "peak_rule": peak_rule,
        "peak_mae": mae,
        "raw_peak_mae": raw_mae,
        "peak_mase": mae / window.naive_peak_scale(),
        "under_rate": under,
        "over_provisioning": over,
        "published_rule_under_rate": pub_under,
        "published_rule_over_provisioning": pub_over,
        "fit_s": result.fit_s,
        "predict_ms": result.predict_ms,
        "origins": float(len(fcs)),
    }
