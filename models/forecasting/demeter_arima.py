"""Demeter's published workload forecaster, rebuilt as the baseline every model here must beat.

Use :class:`DemeterArimaForecaster` in backtests and benchmarks as the yardstick of the published
system (Demeter, ICPE 2024). It follows the published recipe:

1. The rate series is brought onto a 1 s grid (samples coarser than ``grid_s`` are placed at their
   bin centres and linearly interpolated, so a ``features_1m`` series works too).
2. Savitzky-Golay filter, window 51 samples, polynomial order 3; then a centred rolling mean with
   an exponential window of 60 samples (``2 x`` the 30 s step).
3. One pmdarima ``auto_arima`` (MAE scoring on a 20 % out-of-sample tail) per stride of
   30, 60, ... 600 s; the sub-series is taken every stride seconds, anchored at the last sample.
4. Each model forecasts the horizon at its own stride; per second, the models' values are combined
   by an exponentially weighted mean across models (span 5, in stride order), linearly
   interpolated over time and smoothed by a centred 120 s rolling mean; bins are means of that.

One deliberate difference: Demeter ``update()``s every model (a few optimiser steps) with each new
observation; here :meth:`predict` keeps the fitted parameters and re-runs the state filter over the
latest ``state_points`` samples of each sub-series (statsmodels ``apply``). Parameters fitted on
hours of data hardly move in ten minutes; the state is what matters, and predict stays stateless
(a backtest may visit origins in any order).

The published model has no quantiles: forecasts carry only the mean (also as ``quantiles[0.5]``),
and the published planning rule is ``max_mean_x1.10``.

Shapes: ``fit(series)`` takes rec/s on a tz-aware DatetimeIndex (repaired by
:mod:`models.forecasting.series_prep` at ``input_bin_s``); ``predict(history, horizon_s)``
returns ``ceil(horizon_s / bin_s)`` bins of ``bin_s`` starting right after the last input bin.
"""

from __future__ import annotations

import json
import math
import pickle
import warnings
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd
from scipy.signal import savgol_filter

from flinktune.lake.atomic import atomic_dir
from models.forecasting.base import ForecastingModel
from models.forecasting.series_prep import prepare_rate_series
from models.forecasting.types import ForecastInputError, QuantileForecast

if TYPE_CHECKING:
    from pmdarima.arima import ARIMA

__all__ = ["DemeterArimaForecaster", "combine_stride_forecasts", "demeter_preprocess"]

_DEFAULT_STRIDES: tuple[int, ...] = tuple(range(30, 601, 30))


def demeter_preprocess(values: np.ndarray, *, sg_window: int = 51, sg_poly: int = 3, avg_window: int = 60) -> np.ndarray:
    """Savitzky-Golay(``sg_window``, ``sg_poly``) then a centred exponential-window rolling mean.

    ``values`` is a 1-D array on the 1 s grid; the output has the same length. Short arrays shrink
    the filter window to the largest odd length that fits (and the order below it), as published.
    """
    x = np.asarray(values, dtype="float64")
    if x.size == 0:
        return x
    window = min(sg_window, x.size)
    window = window if window % 2 == 1 else window - 1
    if window >= 2:
        x = savgol_filter(x, window, min(sg_poly, window - 1))
    smoothed = pd.Series(x).rolling(window=avg_window, min_periods=1, center=True, win_type="exponential").mean()
    return smoothed.interpolate(limit_direction="both").to_numpy()


def combine_stride_forecasts(
    per_model: list[np.ndarray], last_value: float, span: float = 5.0, rolling_s: int = 120
) -> np.ndarray:
    """Per-second ensemble of stride forecasts: EWM across models, time interpolation, rolling mean.

    ``per_model[k]`` has ``horizon + 1`` rows (row 0 = now, then one per second), NaN where model
    ``k`` has no value (off its stride). Models are weighted in list order by an exponentially
    weighted mean (``alpha = 2 / (span + 1)``, unadjusted, NaN skipped), so later (longer-stride)
    models weigh most. Returns the ``horizon`` per-second values after row 0.
    """
    rows = len(per_model[0])
    alpha = 2.0 / (span + 1.0)
    combined = np.full(rows, np.nan)
    for k in range(rows):
        acc = np.nan
        for col in per_model:
            v = col[k]
            if np.isnan(v):
                continue
            acc = v if np.isnan(acc) else (1 - alpha) * acc + alpha * v
        combined[k] = acc
    if np.isnan(combined[0]):
        combined[0] = last_value
    series = pd.Series(combined).interpolate(limit_direction="both")
    return series.rolling(window=rolling_s, min_periods=1, center=True).mean().to_numpy()[1:]


class DemeterArimaForecaster(ForecastingModel):
    """The Demeter ensemble of auto-ARIMA models on strided sub-series; a ``Forecaster``.

    Parameters: ``strides_s`` (default 30..600 by 30), ``input_bin_s`` (resolution the input is
    repaired to: 1 for per-second traces, 60 for ``features_1m``), ``bin_s`` (forecast bins),
    ``min_points`` (shortest sub-series a stride model is fitted on; shorter strides are kept,
    longer ones dropped when history is short), ``state_points`` (samples re-filtered at predict),
    ``max_fit_points`` (cap per sub-series, newest kept; None = all, as published).
    """

    name = "demeter-arima"

    def __init__(
        self,
        *,
        strides_s: tuple[int, ...] = _DEFAULT_STRIDES,
        input_bin_s: int = 1,
        bin_s: int = 60,
        max_gap_bins: int = 5,
        min_points: int = 24,
        state_points: int = 120,
        max_fit_points: int | None = None,
        seed: int = 0,
    ) -> None:
        if not strides_s or any(s <= 0 for s in strides_s) or list(strides_s) != sorted(set(strides_s)):
            raise ValueError(f"strides_s must be increasing positive seconds, got {strides_s!r}")
        if input_bin_s < 1 or bin_s < 1:
            raise ValueError(f"input_bin_s and bin_s must be >= 1 s, got {input_bin_s}, {bin_s}")
        self.strides_s = tuple(int(s) for s in strides_s)
        self.input_bin_s = int(input_bin_s)
        self.bin_s = int(bin_s)
        self.max_gap_bins = int(max_gap_bins)
        self.min_points = int(min_points)
        self.state_points = int(state_points)
        self.max_fit_points = None if max_fit_points is None else int(max_fit_points)
        self.seed = int(seed)
        self.quantiles: tuple[float, ...] = (0.5,)
        self._models: dict[int, ARIMA] = {}
        self.fit_info: dict[str, float] = {}

    # -- internals --------------------------------------------------------------------------------
    @property
    def min_fit_bins(self) -> int:
        """Input bins :meth:`fit` needs: the shortest stride model must see ``min_points`` samples."""
        return math.ceil(self.strides_s[0] * self.min_points / self.input_bin_s)

    def _grid(self, series: pd.Series, min_bins: int, where: str) -> tuple[pd.DatetimeIndex, np.ndarray, pd.Timestamp]:
        """Repaired 1 s grid of ``series`` (values, and the end of the last input bin)."""
        prep = prepare_rate_series(series, bin_s=self.input_bin_s, max_gap_bins=self.max_gap_bins, min_bins=min_bins, where=where)
        values = prep.values
        end = values.index[-1] + pd.Timedelta(seconds=self.input_bin_s)
        if self.input_bin_s == 1:
            return values.index, values.to_numpy(), end
        # A bin mean describes its centre; hold the edges flat.
        centres = (values.index.as_unit("ns").asi8 // 10**9) + self.input_bin_s / 2.0
        start_s = int(values.index[0].value // 10**9)
        grid_s = np.arange(start_s, int(end.value // 10**9))
        grid = np.interp(grid_s, centres, values.to_numpy())
        return pd.to_datetime(grid_s, unit="s", utc=True), grid, end

    @staticmethod
    def _strided(x: np.ndarray, stride: int) -> np.ndarray:
        # Anchored at the newest sample, as published: the last point is always in the sub-series.
        return x[::-1][::stride][::-1]

    # -- Forecaster protocol ----------------------------------------------------------------------
    def fit(self, series: pd.Series) -> DemeterArimaForecaster:
        """Fit one auto-ARIMA per stride on the filtered 1 s series; ForecastInputError on bad input."""
        import pmdarima as pm
        from threadpoolctl import threadpool_limits

        _, grid, _ = self._grid(series, self.min_fit_bins, "fit series")
        smooth = demeter_preprocess(grid)
        models: dict[int, ARIMA] = {}
        # BLAS threads fight each other on small ARIMA matrices (20 s vs 1 s per fit on 2 cores).
        with threadpool_limits(1), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for stride in self.strides_s:
                sub = self._strided(smooth, stride)
                if len(sub) < self.min_points:
                    continue  # too little history for this stride; longer strides have even less
                if self.max_fit_points is not None:
                    sub = sub[-self.max_fit_points :]
                models[stride] = pm.auto_arima(
                    sub,
                    error_action="ignore",
                    suppress_warnings=True,
                    out_of_sample_size=int(len(sub) * 0.2),
                    scoring="mae",
                    random_state=self.seed,
                )
        if not models:
            raise ForecastInputError(f"fit series: no stride model has {self.min_points} points")
        self._models = models
        self.fit_info = {"models": float(len(models)), "grid_seconds": float(len(grid))}
        return self

    def predict(self, history: pd.Series, horizon_s: int) -> QuantileForecast:
        """Forecast ``ceil(horizon_s / bin_s)`` bins after the end of ``history`` (mean only)."""
        from threadpoolctl import threadpool_limits

        if not self._models:
            raise RuntimeError("DemeterArimaForecaster.predict called before fit (or load)")
        if horizon_s <= 0:
            raise ForecastInputError(f"horizon_s must be positive, got {horizon_s}")
        n = math.ceil(horizon_s / self.bin_s)
        seconds = n * self.bin_s
        longest = max(self._models)
        if isinstance(history, pd.Series) and isinstance(history.index, pd.DatetimeIndex) and len(history):
            # Only the tail that the state filters read (plus filter margin) matters.
            keep = pd.Timedelta(seconds=longest * (self.state_points + 2) + 600)
            history = history[history.index >= history.index.max() - keep]
        _, grid, end = self._grid(history, max(2, math.ceil(self.strides_s[0] * 4 / self.input_bin_s)), "predict history")
        smooth = demeter_preprocess(grid)
        per_model = []
        with threadpool_limits(1), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for stride, model in sorted(self._models.items()):
                sub = self._strided(smooth, stride)[-self.state_points :]
                if len(sub) < 4:
                    continue
                steps = seconds // stride + (1 if seconds % stride else 0)
                res = model.arima_res_.apply(sub)
                fc = np.asarray(res.forecast(steps), dtype="float64")
                col = np.full(seconds + 1, np.nan)
                at = np.arange(1, steps + 1) * stride
                ok = at <= seconds
                col[at[ok]] = fc[ok]
                per_model.append(col)
        if not per_model:
            raise ForecastInputError(f"predict history: too short for any stride model ({len(grid)} s)")
        per_second = combine_stride_forecasts(per_model, float(smooth[-1]))
        mean = np.maximum(per_second.reshape(n, self.bin_s).mean(axis=1), 0.0)
        return QuantileForecast(start=end, bin_s=self.bin_s, mean=mean, quantiles={0.5: mean.copy()}, model=self.name)

    # -- persistence ------------------------------------------------------------------------------
    def params(self) -> dict:
        """Constructor arguments (JSON-friendly)."""
        return {
            "strides_s": list(self.strides_s),
            "input_bin_s": self.input_bin_s,
            "bin_s": self.bin_s,
            "max_gap_bins": self.max_gap_bins,
            "min_points": self.min_points,
            "state_points": self.state_points,
            "max_fit_points": self.max_fit_points,
            "seed": self.seed,
        }

    def save(self, path: str | Path) -> Path:
        """Write the fitted ensemble to directory ``path`` (pickled ARIMAs + ``meta.json``), atomically."""
        if not self._models:
            raise RuntimeError("cannot save an unfitted DemeterArimaForecaster")
        path = Path(path)
        with atomic_dir(path) as tmp:
            (tmp / "models.pkl").write_bytes(pickle.dumps(self._models))
            meta = {"kind": self.name, "params": self.params(), "fit_info": self.fit_info}
            (tmp / "meta.json").write_text(json.dumps(meta, indent=2))
        return path

    @classmethod
    def load(cls, path: str | Path, *, device: str = "cpu") -> DemeterArimaForecaster:
        """Restore a model written by :meth:`save` (``device`` is accepted for a uniform interface)."""
        path = Path(path)
        meta = json.loads((path / "meta.json").read_text())
        params = dict(meta["params"], strides_s=tuple(meta["params"]["strides_s"]))
        self = cls(**params)
        self._models = pickle.loads((path / "models.pkl").read_bytes())
        self.fit_info = dict(meta.get("fit_info", {}))
        return self
