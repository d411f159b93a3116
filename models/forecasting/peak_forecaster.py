"""Direct peak model: gradient-boosted quantile regressors for the next bins and for their maximum.

Use :class:`DirectPeakForecaster` when what matters is the peak of the next window (the rate a
policy plans for). Path forecasters (ARIMA, TiDE) predict smooth bin means; the highest of those
sits below the highest of the noisy bins that actually come, and its error at ramps and in noisy
stretches dominates the 10-minute peak error. This model instead learns, from the training span
only, how far above or below the last bin each of the next bins and the window's maximum land,
given the recent past (:mod:`models.forecasting.peak_features`: changes over 1-30 bins, the
recent max, volatility, the level; minute-of-day sine/cosine only when the training history spans
``calendar_min_days``, because a shorter history leaves most minutes of the day unseen).

One scikit-learn ``HistGradientBoostingRegressor`` (quantile loss) per level for the bins (the
horizon step is a feature, so one model serves all bins) and one per level for the peak. Trees
were chosen over a linear or small MLP quantile regressor (same features, pinball loss) by
backtests on twin traces of seeds 7-9: lower peak error on tsw, mixed on ysb
(``docs/results/forecasting.md``).

Why a hand-written model beside :class:`~models.forecasting.darts_peak.DartsPeakForecaster`
(``estimator="hgb"``, the same idea in darts): darts' regression models fit one regressor per
target column, while this one shares a single bin model across the horizon steps (the step is a
feature), on minute bins; darts has no way to express that sharing. It stays a champion candidate
because it wins on some traces (tsw in ``docs/results/forecasting.md``); the champion rule
(:mod:`models.forecasting.champion`) decides per job.

Output: a :class:`QuantileForecast` whose per-bin quantiles are the bin models' (sorted across
levels so they never cross; ``mean`` is the per-bin median) and whose ``peak_quantiles`` are the
peak models' (sorted, and at least the highest bin quantile of the same level, since a window's
max is never below any of its bins). ``peak_quantiles`` is set only for the trained horizon;
shorter horizons get bins only, longer ones are refused.

Shapes: ``fit(series)`` takes rec/s on a tz-aware DatetimeIndex (any step; repaired by
:mod:`models.forecasting.series_prep`: NaN dropped, short gaps interpolated, irregular steps
averaged into bins; too-long gaps and too-short histories refused). ``predict(history,
horizon_s)`` needs :data:`~models.forecasting.peak_features.CONTEXT_BINS` bins of history and
returns ``ceil(horizon_s / bin_s)`` bins starting one bin after the last history bin.
"""

from __future__ import annotations

import json
import pickle
from pathlib import Path

import numpy as np
import pandas as pd

from flinktune.lake.atomic import atomic_dir
from models.forecasting.base import ForecastingModel, TrainedHorizon
from models.forecasting.peak_features import CONTEXT_BINS, future_targets, window_features
from models.forecasting.peak_trees import QuantileTrees, checked_levels, peak_forecasts
from models.forecasting.series_prep import prepare_rate_series
from models.forecasting.types import ForecastInputError, QuantileForecast

__all__ = ["PEAK_LEVELS", "DirectPeakForecaster"]

#: Quantile levels of both the bin and the peak models.
PEAK_LEVELS: tuple[float, ...] = (0.1, 0.25, 0.5, 0.75, 0.9, 0.95, 0.99)


class DirectPeakForecaster(QuantileTrees, TrainedHorizon, ForecastingModel):
    """Quantiles of the next bins and of their max from the recent past; a ``Forecaster``.

    Parameters: ``default_horizon_s`` (the window whose peak is modelled, default 600 s),
    ``min_train_origins`` (training windows :meth:`fit` needs beyond the context and horizon),
    ``max_iter`` / ``learning_rate`` / ``max_leaf_nodes`` / ``min_samples_leaf`` (the boosted
    trees; small trees and few rounds, since a 12 h history gives ~700 overlapping windows),
    ``calendar_min_days``, ``max_gap_bins`` (input repair), ``seed``.
    """

    name = "direct-peak-gbm"

    def __init__(
        self,
        *,
        bin_s: int = 60,
        default_horizon_s: int = 600,
        quantiles: tuple[float, ...] = PEAK_LEVELS,
        max_iter: int = 100,
        learning_rate: float = 0.05,
        max_leaf_nodes: int = 8,
        min_samples_leaf: int = 20,
        min_train_origins: int = 100,
        calendar_min_days: float = 2.0,
        max_gap_bins: int = 5,
        seed: int = 0,
    ) -> None:
        levels = checked_levels(quantiles)
        if bin_s < 1 or default_horizon_s < bin_s:
            raise ValueError(f"need bin_s >= 1 and default_horizon_s >= bin_s, got {bin_s}, {default_horizon_s}")
        if max_iter < 1 or min_train_origins < 1:
            raise ValueError(f"need max_iter >= 1 and min_train_origins >= 1, got {max_iter}, {min_train_origins}")
        self.bin_s = int(bin_s)
        self.default_horizon_s = int(default_horizon_s)
        self.quantiles = levels
        self._set_trees(max_iter, learning_rate, max_leaf_nodes, min_samples_leaf)
        self.min_train_origins = int(min_train_origins)
        self.calendar_min_days = float(calendar_min_days)
        self.max_gap_bins = int(max_gap_bins)
        self.seed = int(seed)
        self._bin_models: list = []
        self._peak_models: list = []
        self._scale = 1.0
        self._calendar = False
        self.fit_info: dict[str, float] = {}

    @property
    def min_fit_bins(self) -> int:
        """Bins of history :meth:`fit` needs: context, one horizon of truth, ``min_train_origins`` windows."""
        return CONTEXT_BINS + self.horizon_bins + self.min_train_origins - 1

    # -- internals --------------------------------------------------------------------------------
    def _features(self, values: pd.Series, ends: np.ndarray) -> np.ndarray:
        minutes = None
        if self._calendar:
            origin = values.index[ends - 1] + pd.Timedelta(seconds=self.bin_s)  # also for an origin after the series
            minutes = np.asarray(origin.hour * 60 + origin.minute + origin.second / 60.0, dtype="float64")
        return window_features(values.to_numpy(), ends, self._scale, minutes)

    def _bin_rows(self, x: np.ndarray, n: int) -> np.ndarray:
        """One row per (origin, horizon step): the origin's features plus the step (0-based)."""
        steps = np.tile(np.arange(n, dtype="float64"), len(x))
        return np.column_stack([np.repeat(x, n, axis=0), steps])

    def _forecasts(self, values: pd.Series, ends: np.ndarray, n: int) -> list[QuantileForecast]:
        import sklearn.ensemble  # noqa: F401  (loaded before threadpool_limits, so its OpenMP is limited too)
        from threadpoolctl import threadpool_limits

        x = self._features(values, ends)
        ref = values.to_numpy()[ends - 1]
        # One OpenMP thread: a few hundred rows per call, where thread start-up costs more than it saves.
        with threadpool_limits(1):
            bins = np.stack([m.predict(self._bin_rows(x, n)) for m in self._bin_models], axis=1)  # (origins*n, L)
            peak = np.stack([m.predict(x) for m in self._peak_models], axis=1) if n == self.horizon_bins else None
        bins = bins.reshape(len(ends), n, len(self.quantiles)).transpose(0, 2, 1) * self._scale + ref[:, None, None]
        peak = peak * self._scale + ref[:, None] if peak is not None else None
        starts = values.index[ends - 1] + pd.Timedelta(seconds=self.bin_s)
        return peak_forecasts(starts, self.bin_s, self.quantiles, bins, peak, self.name)

    # -- Forecaster protocol ----------------------------------------------------------------------
    def fit(self, series: pd.Series) -> DirectPeakForecaster:
        """Fit the bin and peak models on every whole window of ``series``; ForecastInputError on bad input."""
        import sklearn.ensemble  # noqa: F401  (loaded before threadpool_limits, so its OpenMP is limited too)
        from threadpoolctl import threadpool_limits

        prep = prepare_rate_series(
            series, bin_s=self.bin_s, max_gap_bins=self.max_gap_bins, min_bins=self.min_fit_bins, where="fit series"
        )
        values = prep.values
        mean = float(values.mean())
        self._scale = mean if mean > 0 else 1.0
        span_days = (values.index[-1] - values.index[0]).total_seconds() / 86400.0
        self._calendar = span_days >= self.calendar_min_days
        n = self.horizon_bins
        ends = np.arange(CONTEXT_BINS, len(values) - n + 1)
        x = self._features(values, ends)
        y = future_targets(values.to_numpy(), ends, n, self._scale)
        rows = self._bin_rows(x, n)
        with threadpool_limits(1):
            self._bin_models = [self._regressor(q).fit(rows, y[:, :n].reshape(-1)) for q in self.quantiles]
            self._peak_models = [self._regressor(q).fit(x, y[:, n]) for q in self.quantiles]
        self.fit_info = {
            "train_bins": float(len(values)),
            "train_windows": float(len(ends)),
            "dropped_nan": float(prep.dropped_nan),
            "interpolated_bins": float(prep.interpolated_bins),
            "calendar_covariates": float(self._calendar),
        }
        return self

    def _check_ready(self, horizon_s: int) -> int:
        if not self._peak_models:
            raise RuntimeError("DirectPeakForecaster: predict called before fit (or load)")
        return self._trained_bins(horizon_s)

    def predict(self, history: pd.Series, horizon_s: int) -> QuantileForecast:
        """Forecast ``ceil(horizon_s / bin_s)`` bins after the end of ``history`` (only its tail is read)."""
        n = self._check_ready(horizon_s)
        if isinstance(history, pd.Series) and isinstance(history.index, pd.DatetimeIndex) and len(history):
            last = history.index.max().floor(f"{self.bin_s}s")
            history = history[history.index >= last - pd.Timedelta(seconds=self.bin_s * CONTEXT_BINS)]
        prep = prepare_rate_series(
            history, bin_s=self.bin_s, max_gap_bins=self.max_gap_bins, min_bins=CONTEXT_BINS, where="predict history"
        )
        values = prep.values
        return self._forecasts(values, np.array([len(values)]), n)[0]

    def historical_forecasts(self, series: pd.Series, origins: pd.DatetimeIndex, horizon_s: int) -> list[QuantileForecast]:
        """Forecasts at ``origins`` of a regular ``bin_s`` series in one batch (same numbers as :meth:`predict`)."""
        n = self._check_ready(horizon_s)
        ends = np.searchsorted(series.index, origins)
        # Instants, not index objects: an index in us and origins in ns are the same bins.
        if (ends >= len(series)).any() or not np.array_equal(series.index[ends].as_unit("ns").asi8, origins.as_unit("ns").asi8):
            raise ForecastInputError("historical_forecasts: every origin must be a bin of the series")
        if ends.min() < CONTEXT_BINS:
            raise ForecastInputError(
                f"historical_forecasts: origin {origins[int(np.argmin(ends))].isoformat()} has "
                f"{int(ends.min())} bins of history, needs {CONTEXT_BINS}"
            )
        return self._forecasts(series, ends, n)

    # -- persistence ------------------------------------------------------------------------------
    def params(self) -> dict:
        """Constructor arguments (JSON-friendly): what to log and what :meth:`load` rebuilds from."""
        return {
            "bin_s": self.bin_s,
            "default_horizon_s": self.default_horizon_s,
            "quantiles": list(self.quantiles),
            **self._tree_params(),
            "min_train_origins": self.min_train_origins,
            "calendar_min_days": self.calendar_min_days,
            "max_gap_bins": self.max_gap_bins,
            "seed": self.seed,
        }

    def save(self, path: str | Path) -> Path:
        """Write the fitted models to directory ``path`` (pickled regressors + ``meta.json``), atomically."""
        if not self._peak_models:
            raise RuntimeError("cannot save an unfitted DirectPeakForecaster")
        path = Path(path)
        with atomic_dir(path) as tmp:
            (tmp / "models.pkl").write_bytes(pickle.dumps({"bins": self._bin_models, "peak": self._peak_models}))
            meta = {
                "kind": self.name,
                "params": self.params(),
                "scale": self._scale,
                "calendar": self._calendar,
                "fit_info": self.fit_info,
            }
            (tmp / "meta.json").write_text(json.dumps(meta, indent=2))
        return path

    @classmethod
    def load(cls, path: str | Path, *, device: str = "cpu") -> DirectPeakForecaster:
        """Restore a model written by :meth:`save` (``device`` is accepted for a uniform interface)."""
        path = Path(path)
        meta = json.loads((path / "meta.json").read_text())
        self = cls(**dict(meta["params"], quantiles=tuple(meta["params"]["quantiles"])))
        models = pickle.loads((path / "models.pkl").read_bytes())
        self._bin_models, self._peak_models = models["bins"], models["peak"]
        self._scale = float(meta["scale"])
        self._calendar = bool(meta["calendar"])
        self.fit_info = dict(meta.get("fit_info", {}))
        return self
