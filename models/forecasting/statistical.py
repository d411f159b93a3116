"""A statistical darts model (damped-trend exponential smoothing or Theta) with calibrated quantiles.

Use :class:`StatisticalForecaster` as the cheap, explainable middle ground between seasonal naive
and the torch model: no training beyond a calibration pass, ~10-40 ms per forecast. It is a local
model: every forecast refits the darts model on the last ``train_bins`` bins of the history.
Quantiles are conformal: at :meth:`fit`, darts ``historical_forecasts`` (refit per origin) runs
over the last ``calib_origins`` origins of the training series, and per horizon step the
quantiles of ``truth / point forecast`` are stored; a forecast's quantile ``q`` at step ``h`` is
the point forecast times that ratio quantile (so they never cross and scale with the level).

Shapes: ``fit(series)`` / ``predict(history, horizon_s)`` as every forecaster here (rec/s on a
tz-aware index, repaired by :mod:`models.forecasting.series_prep`).
"""

from __future__ import annotations

import json
import math
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

from flinktune.lake.atomic import atomic_dir
from models.forecasting.base import ForecastingModel, TrainedHorizon
from models.forecasting.series_prep import prepare_rate_series
from models.forecasting.types import ForecastInputError, QuantileForecast

__all__ = ["STAT_KINDS", "StatisticalForecaster"]

STAT_KINDS: tuple[str, ...] = ("ets", "theta")
_LEVELS: tuple[float, ...] = (0.1, 0.5, 0.9, 0.95, 0.99)


class StatisticalForecaster(TrainedHorizon, ForecastingModel):
    """darts ExponentialSmoothing (additive damped trend) or Theta, refit per forecast; a ``Forecaster``."""

    def __init__(
        self,
        *,
        kind: str = "ets",
        bin_s: int = 60,
        train_bins: int = 120,
        default_horizon_s: int = 600,
        calib_origins: int = 100,
        max_gap_bins: int = 5,
        quantiles: tuple[float, ...] = _LEVELS,
    ) -> None:
        if kind not in STAT_KINDS:
            raise ValueError(f"kind must be one of {STAT_KINDS}, got {kind!r}")
        if train_bins < 10 or calib_origins < 10:
            raise ValueError(f"need train_bins >= 10 and calib_origins >= 10, got {train_bins}, {calib_origins}")
        self.kind = kind
        self.name = f"darts-{kind}"
        self.bin_s = int(bin_s)
        self.train_bins = int(train_bins)
        self.default_horizon_s = int(default_horizon_s)
        self.calib_origins = int(calib_origins)
        self.max_gap_bins = int(max_gap_bins)
        self.quantiles = tuple(sorted(quantiles))
        self._ratios: np.ndarray | None = None  # (horizon bins, levels)
        self.fit_info: dict[str, float] = {}

    @property
    def min_fit_bins(self) -> int:
        return self.train_bins + self.calib_origins + self.horizon_bins

    def _darts_model(self):
        from darts.models import ExponentialSmoothing, Theta
        from darts.utils.utils import ModelMode, SeasonalityMode

        if self.kind == "ets":
            return ExponentialSmoothing(trend=ModelMode.ADDITIVE, damped=True, seasonal=None)
        return Theta(theta=2, season_mode=SeasonalityMode.NONE)

    def _to_darts(self, values: pd.Series):
        from darts import TimeSeries

        naive = values.copy()
        naive.index = naive.index.tz_convert(None)
        return TimeSeries.from_series(naive.astype("float64"), freq=f"{self.bin_s}s")

    def _hist(self, values: pd.Series, start: pd.Timestamp, n: int, stride: int) -> list[np.ndarray]:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            outs = self._darts_model().historical_forecasts(
                self._to_darts(values),
                start=start.tz_convert(None),
                start_format="value",
                forecast_horizon=n,
                stride=stride,
                retrain=True,
                train_length=self.train_bins,
                overlap_end=False,
                last_points_only=False,
                verbose=False,
            )
        return [o.values(copy=True)[:, 0] for o in outs]

    def fit(self, series: pd.Series) -> StatisticalForecaster:
        """Calibrate the ratio quantiles on the training series' last ``calib_origins`` origins."""
        prep = prepare_rate_series(
            series, bin_s=self.bin_s, max_gap_bins=self.max_gap_bins, min_bins=self.min_fit_bins, where="fit series"
        )
        values, n = prep.values, self.horizon_bins
        first = len(values) - n - self.calib_origins + 1
        points = self._hist(values, values.index[first], n, 1)
        y = values.to_numpy()
        ratios = np.array([y[first + i : first + i + n] / np.maximum(p, 1e-9) for i, p in enumerate(points)])
        self._ratios = np.quantile(ratios, self.quantiles, axis=0).T  # (n, levels)
        self.fit_info = {"calibration_origins": float(len(points)), "train_bins": float(len(values))}
        return self

    def _forecast(self, point: np.ndarray, start: pd.Timestamp) -> QuantileForecast:
        assert self._ratios is not None  # its callers check fit first
        n = len(point)
        rows = np.minimum(np.arange(n), len(self._ratios) - 1)  # beyond the calibrated horizon: last step
        q = np.maximum(point[:, None] * self._ratios[rows], 0.0)
        levels = {float(lv): q[:, i].copy() for i, lv in enumerate(self.quantiles)}
        return QuantileForecast(start=start, bin_s=self.bin_s, mean=np.maximum(point, 0.0), quantiles=levels, model=self.name)

    def predict(self, history: pd.Series, horizon_s: int) -> QuantileForecast:
        """Refit on the last ``train_bins`` bins of ``history`` and forecast ``ceil(horizon_s / bin_s)`` bins."""
        if self._ratios is None:
            raise RuntimeError(f"{self.name}: predict called before fit (or load)")
        if horizon_s <= 0:
            raise ForecastInputError(f"horizon_s must be positive, got {horizon_s}")
        n = math.ceil(horizon_s / self.bin_s)
        if isinstance(history, pd.Series) and isinstance(history.index, pd.DatetimeIndex) and len(history):
            history = history[history.index >= history.index.max() - pd.Timedelta(seconds=self.bin_s * (self.train_bins + 1))]
        prep = prepare_rate_series(
            history, bin_s=self.bin_s, max_gap_bins=self.max_gap_bins, min_bins=self.train_bins, where="predict history"
        )
        values = prep.values.iloc[-self.train_bins :]
        model = self._darts_model()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            model.fit(self._to_darts(values))
            point = model.predict(n).values(copy=True)[:, 0]
        return self._forecast(point, values.index[-1] + pd.Timedelta(seconds=self.bin_s))

    def historical_forecasts(self, series: pd.Series, origins: pd.DatetimeIndex, horizon_s: int) -> list[QuantileForecast]:
        """Forecasts at evenly spaced ``origins`` of a regular series via darts ``historical_forecasts``."""
        if self._ratios is None:
            raise RuntimeError(f"{self.name}: historical_forecasts called before fit (or load)")
        n = math.ceil(horizon_s / self.bin_s)
        stride = int((origins[1] - origins[0]).total_seconds() // self.bin_s) if len(origins) > 1 else 1
        points = self._hist(series, origins[0], n, stride)[: len(origins)]
        return [self._forecast(p, o) for p, o in zip(points, origins)]

    # -- persistence ------------------------------------------------------------------------------
    def params(self) -> dict:
        return {
            "kind": self.kind,
            "bin_s": self.bin_s,
            "train_bins": self.train_bins,
            "default_horizon_s": self.default_horizon_s,
            "calib_origins": self.calib_origins,
            "max_gap_bins": self.max_gap_bins,
            "quantiles": list(self.quantiles),
        }

    def save(self, path: str | Path) -> Path:
        """Write params and calibrated ratios to directory ``path`` (``meta.json``), atomically."""
        if self._ratios is None:
            raise RuntimeError(f"cannot save an unfitted {self.name}")
        path = Path(path)
        with atomic_dir(path) as tmp:
            meta = {"kind": self.name, "params": self.params(), "ratios": self._ratios.tolist(), "fit_info": self.fit_info}
            (tmp / "meta.json").write_text(json.dumps(meta, indent=2))
        return path

    @classmethod
    def load(cls, path: str | Path, *, device: str = "cpu") -> StatisticalForecaster:
        meta = json.loads((Path(path) / "meta.json").read_text())
        params = dict(meta["params"], quantiles=tuple(meta["params"]["quantiles"]))
        self = cls(**params)
        self._ratios = np.asarray(meta["ratios"], dtype="float64")
        self.fit_info = dict(meta.get("fit_info", {}))
        return self
