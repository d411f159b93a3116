"""darts regression models with quantile regression for the next bins and their peak, read at fine resolution.

Use :class:`DartsPeakForecaster` when what matters is the peak of the next window (the rate a
policy plans for) and the rate is sampled finer than the forecast bins (the benchmark's 1 s
traces, read on 10 s bins). It is a darts ``SKLearnModel``: the target series holds, at every
input bin ``t``, the ``horizon`` bin means that ended at ``t`` and their maximum, relative to the
rate one horizon before ``t``; the past covariates are changes, rises, volatility and recent
bin means (:mod:`models.forecasting.peak_covariates`); ``output_chunk_shift`` puts the single
output one horizon ahead, so the model maps "the past up to the origin" to "the next window's
bins and peak". darts builds the lagged training table (one row every ``train_stride_s``),
fits one regressor per quantile level and target column, and serves batched
``historical_forecasts`` for backtests.

``estimator``:

- ``"linear"``: darts ``LinearRegressionModel(likelihood="quantile")`` (scikit-learn
  ``QuantileRegressor``, unpenalised). It extrapolates a smooth trend, which trees cannot: on the
  real ADS trace it is the better of the two.
- ``"hgb"``: darts ``SKLearnModel`` around scikit-learn's ``HistGradientBoostingRegressor`` with
  the quantile loss, one per level (darts has no LightGBM here). Better on noisy traces with
  regimes and spikes (the twin's ysb and tsw).

Output: a :class:`QuantileForecast` whose per-bin quantiles come from the bin columns (sorted
across levels, clipped at 0; ``mean`` is the median) and whose ``peak_quantiles`` come from the
peak column (sorted, and at least the highest bin quantile of the same level). Horizons shorter
than the trained one get bins only; longer ones are refused.

Shapes: ``fit(series)`` and ``predict(history, horizon_s)`` take rec/s on a tz-aware
DatetimeIndex at any step; the input is repaired to ``input_bin_s`` bins
(:mod:`models.forecasting.series_prep`). ``predict`` returns ``ceil(horizon_s / bin_s)`` bins
starting at the end of the last whole input bin, which must be a ``bin_s`` boundary.
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

from flinktune.lake.atomic import atomic_dir
from models.forecasting.base import ForecastingModel, TrainedHorizon
from models.forecasting.peak_covariates import context_input_bins, peak_covariates, peak_targets
from models.forecasting.peak_trees import QuantileTrees, checked_levels, peak_forecasts
from models.forecasting.series_prep import prepare_rate_series
from models.forecasting.types import ForecastInputError, QuantileForecast

if TYPE_CHECKING:
    from darts.models import SKLearnModel

__all__ = ["DARTS_PEAK_LEVELS", "ESTIMATORS", "DartsPeakForecaster"]

#: Quantile levels of the bin and peak columns (fewer than the hand-written peak model's: each
#: level costs one regressor per target column).
DARTS_PEAK_LEVELS: tuple[float, ...] = (0.1, 0.5, 0.75, 0.9, 0.95, 0.99)
ESTIMATORS: tuple[str, ...] = ("linear", "hgb")


class DartsPeakForecaster(QuantileTrees, TrainedHorizon, ForecastingModel):
    """Quantiles of the next bins and of their peak from fine-grained recent history; a ``Forecaster``.

    Parameters: ``estimator`` (``"linear"`` or ``"hgb"``, module doc), ``bin_s`` (forecast bins),
    ``input_bin_s`` (the grid the input is read on; a divisor of ``bin_s``: 10 for per-second
    traces, ``bin_s`` for minute features), ``default_horizon_s`` (the window whose peak is
    modelled), ``train_stride_s`` (spacing of training rows), ``min_train_rows`` (rows
    :meth:`fit` needs), ``max_iter`` / ``learning_rate`` / ``max_leaf_nodes`` / ``min_samples_leaf``
    (trees only), ``max_gap_bins`` (input repair, in input bins: 30 = 5 minutes at 10 s, as the
    minute models' 5 bins), ``seed``.
    """

    #: :meth:`historical_forecasts` takes the input at any step (backtests pass the raw trace).
    reads_any_resolution = True

    def __init__(
        self,
        *,
        estimator: str = "linear",
        bin_s: int = 60,
        input_bin_s: int = 10,
        default_horizon_s: int = 600,
        quantiles: tuple[float, ...] = DARTS_PEAK_LEVELS,
        train_stride_s: int = 60,
        min_train_rows: int = 100,
        max_iter: int = 100,
        learning_rate: float = 0.05,
        max_leaf_nodes: int = 8,
        min_samples_leaf: int = 20,
        max_gap_bins: int = 30,
        seed: int = 0,
    ) -> None:
        if estimator not in ESTIMATORS:
            raise ValueError(f"estimator must be one of {list(ESTIMATORS)}, got {estimator!r}")
        levels = checked_levels(quantiles)
        if input_bin_s < 1 or bin_s % input_bin_s or default_horizon_s < bin_s:
            raise ValueError(
                f"need input_bin_s >= 1 dividing bin_s and default_horizon_s >= bin_s, got "
                f"input_bin_s={input_bin_s}, bin_s={bin_s}, default_horizon_s={default_horizon_s}"
            )
        if train_stride_s < input_bin_s or min_train_rows < 1 or max_iter < 1:
            raise ValueError(
                f"need train_stride_s >= input_bin_s, min_train_rows >= 1, max_iter >= 1, got "
                f"{train_stride_s}, {min_train_rows}, {max_iter}"
            )
        self.estimator = estimator
        self.name = f"darts-peak-{estimator}"
        self.bin_s = int(bin_s)
        self.input_bin_s = int(input_bin_s)
        self.default_horizon_s = int(default_horizon_s)
        self.quantiles = levels
        self.train_stride_s = int(train_stride_s)
        self.min_train_rows = int(min_train_rows)
        self._set_trees(max_iter, learning_rate, max_leaf_nodes, min_samples_leaf)
        self.max_gap_bins = int(max_gap_bins)
        self.seed = int(seed)
        self._models: dict[float, SKLearnModel] = {}
        self._scale = 1.0
        self.fit_info: dict[str, float] = {}

    # -- sizes ------------------------------------------------------------------------------------
    @property
    def _span(self) -> int:
        """Input bins in one horizon (the output shift)."""
        return self.horizon_bins * self.bin_s // self.input_bin_s

    @property
    def context_bins(self) -> int:
        """Input bins of history one forecast needs."""
        return context_input_bins(self.input_bin_s, self.bin_s)

    @property
    def min_fit_bins(self) -> int:
        """History :meth:`fit` needs, in forecast bins: context, one horizon, ``min_train_rows`` rows."""
        need_s = (self.context_bins + self._span) * self.input_bin_s + self.min_train_rows * self.train_stride_s
        return math.ceil(need_s / self.bin_s)

    # -- darts ------------------------------------------------------------------------------------
    @property
    def _darts_levels(self) -> list[float]:
        """The levels the linear model is fitted on: ours plus their mirror images around 0.5."""
        return sorted({round(q, 6) for q in self.quantiles} | {round(1 - q, 6) for q in self.quantiles})

    def _darts_models(self) -> dict[float, SKLearnModel]:
        from darts.models import LinearRegressionModel, SKLearnModel

        common = dict(lags=None, lags_past_covariates=[-1], output_chunk_length=1, output_chunk_shift=self._span - 1)
        if self.estimator == "linear":
            # One darts model fits every level (a QuantileRegressor per level and column), unpenalised;
            # darts wants the levels symmetric around 0.5, so mirrored ones are fitted too.
            model = LinearRegressionModel(
                likelihood="quantile", quantiles=self._darts_levels, alpha=0.0, solver="highs", **common
            )
            return {q: model for q in self.quantiles}
        return {q: SKLearnModel(model=self._regressor(q), **common) for q in self.quantiles}

    def _series(self, values: pd.Series, array: np.ndarray, names: list[str]):
        from darts import TimeSeries

        index = values.index.tz_convert(None)  # darts wants naive UTC timestamps
        frame = pd.DataFrame(array.astype("float64"), index=index, columns=names)
        return TimeSeries.from_dataframe(frame, freq=f"{self.input_bin_s}s")

    def _inputs(self, values: pd.Series, first: int):
        """Target and covariate series from input bin ``first`` on (earlier rows lack context)."""
        y = values.to_numpy()
        cov = peak_covariates(y, input_bin_s=self.input_bin_s, bin_s=self.bin_s, scale=self._scale)
        tgt = peak_targets(y, input_bin_s=self.input_bin_s, bin_s=self.bin_s, horizon_bins=self.horizon_bins, scale=self._scale)
        part = values.iloc[first:]
        cov_names = [f"c{i}" for i in range(cov.shape[1])]
        tgt_names = [f"bin{h}" for h in range(self.horizon_bins)] + ["peak"]
        # Target rows before one horizon of history exist only as NaN; darts never reads them
        # (lags=None), but TimeSeries refuses NaN, so they are zero-filled placeholders.
        return self._series(part, np.nan_to_num(tgt[first:]), tgt_names), self._series(part, cov[first:], cov_names)

    def _prepare(self, series: pd.Series, min_bins: int, where: str) -> pd.Series:
        return prepare_rate_series(
            series, bin_s=self.input_bin_s, max_gap_bins=self.max_gap_bins, min_bins=min_bins, where=where
        ).values

    # -- Forecaster protocol ----------------------------------------------------------------------
    def fit(self, series: pd.Series) -> DartsPeakForecaster:
        """Fit every level on all whole windows of ``series``; ForecastInputError on bad input."""
        from threadpoolctl import threadpool_limits

        values = self._prepare(series, math.ceil(self.min_fit_bins * self.bin_s / self.input_bin_s), "fit series")
        mean = float(values.mean())
        self._scale = mean if mean > 0 else 1.0
        first = self.context_bins - 1
        target, cov = self._inputs(values, first)
        # The first usable target row is one horizon after the first covariate row.
        target = target[self._span :]
        stride = self.train_stride_s // self.input_bin_s
        models = self._darts_models()
        with threadpool_limits(1), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for m in dict.fromkeys(models.values()):  # the linear model is shared by all levels
                m.fit(target, past_covariates=cov, stride=stride)
        self._models = models
        self.fit_info = {"train_input_bins": float(len(values)), "train_rows": float(len(target) // stride)}
        return self

    def _check_ready(self, horizon_s: int) -> int:
        if not self._models:
            raise RuntimeError(f"{self.name}: predict called before fit (or load)")
        return self._trained_bins(horizon_s)

    def _raw(self, values: pd.Series, ends: np.ndarray) -> np.ndarray:
        """Predicted target rows ``(len(ends), levels, columns)`` for origins after input bins ``ends - 1``."""
        from threadpoolctl import threadpool_limits

        first = int(ends.min()) - self.context_bins
        values = values.iloc[max(0, first) : int(ends.max())]
        ends = ends - max(0, first)
        target, cov = self._inputs(values, 0)
        # darts' start is the first origin (the bin after its history); the shifted output lands
        # on the horizon's last input bin.
        start = values.index[int(ends[0]) - 1].tz_convert(None) + pd.Timedelta(seconds=self.input_bin_s)
        expect = start + pd.Timedelta(seconds=(self._span - 1) * self.input_bin_s)
        # darts starts only at a time inside the target series: one placeholder row at the last
        # origin (never read, lags=None) lets the last origin be forecast too.
        target = target.append_values(np.zeros((1, target.width)))
        steps = np.diff(ends) if len(ends) > 1 else np.array([1])
        if len(set(steps.tolist())) != 1:
            raise ForecastInputError("historical_forecasts: origins must be evenly spaced")
        out = np.empty((len(ends), len(self.quantiles), target.width))
        cache: dict[int, np.ndarray] = {}
        with threadpool_limits(1), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for j, q in enumerate(self.quantiles):
                model = self._models[q]
                if id(model) not in cache:  # the linear model serves every level in one call
                    fcs = model.historical_forecasts(
                        target,
                        past_covariates=cov,
                        start=start,
                        start_format="value",
                        forecast_horizon=1,
                        stride=int(steps[0]),
                        retrain=False,
                        overlap_end=True,
                        last_points_only=True,
                        predict_likelihood_parameters=self.estimator == "linear",
                        verbose=False,
                    )
                    if fcs.start_time() != expect:
                        raise RuntimeError(f"{self.name}: darts forecast starts {fcs.start_time()}, expected {expect}")
                    cache[id(model)] = fcs.values(copy=True)[: len(ends)]
                vals = cache[id(model)]
                if self.estimator == "linear":  # columns: each target column's levels, in level order
                    levels = self._darts_levels
                    vals = vals.reshape(len(vals), target.width, len(levels))[:, :, levels.index(round(q, 6))]
                out[:, j, :] = vals
        return out

    def _forecasts(self, values: pd.Series, ends: np.ndarray, n: int) -> list[QuantileForecast]:
        raw = self._raw(values, ends) * self._scale
        ref = values.to_numpy()[ends - 1]
        bins = raw[:, :, :n] + ref[:, None, None]
        # The peak column is the trained horizon's: a shorter forecast gets bins only.
        peak = raw[:, :, -1] + ref[:, None] if n == self.horizon_bins else None
        starts = values.index[ends - 1] + pd.Timedelta(seconds=self.input_bin_s)
        return peak_forecasts(starts, self.bin_s, self.quantiles, bins, peak, self.name)

    def predict(self, history: pd.Series, horizon_s: int) -> QuantileForecast:
        """Forecast ``ceil(horizon_s / bin_s)`` bins after the end of ``history`` (only its tail is read)."""
        n = self._check_ready(horizon_s)
        if isinstance(history, pd.Series) and isinstance(history.index, pd.DatetimeIndex) and len(history):
            last = history.index.max().floor(f"{self.input_bin_s}s")
            history = history[history.index >= last - pd.Timedelta(seconds=self.input_bin_s * (self.context_bins + 1))]
        values = self._prepare(history, self.context_bins, "predict history")
        return self._forecasts(values, np.array([len(values)]), n)[0]

    def historical_forecasts(self, series: pd.Series, origins: pd.DatetimeIndex, horizon_s: int) -> list[QuantileForecast]:
        """Forecasts at evenly spaced ``origins`` (``bin_s`` boundaries) from ``series`` at any step, in one batch.

        Same numbers as :meth:`predict` on ``series[series.index < o]`` for every origin ``o``.
        """
        n = self._check_ready(horizon_s)
        values = self._prepare(series[series.index < origins[-1]], self.context_bins, "historical_forecasts series")
        ends = np.searchsorted(values.index, origins)
        ends[ends > len(values)] = len(values)
        follows = values.index[ends - 1] + pd.Timedelta(seconds=self.input_bin_s)
        # Instants, not index objects: the lake's timestamps are in us, prepared series in ns (equals() says False).
        if not np.array_equal(follows.as_unit("ns").asi8, origins.as_unit("ns").asi8):
            raise ForecastInputError("historical_forecasts: every origin must follow an input bin of the series")
        if ends.min() < self.context_bins:
            raise ForecastInputError(
                f"historical_forecasts: origin {origins[int(np.argmin(ends))].isoformat()} has "
                f"{int(ends.min())} input bins of history, needs {self.context_bins}"
            )
        return self._forecasts(values, ends, n)

    # -- persistence ------------------------------------------------------------------------------
    def params(self) -> dict:
        """Constructor arguments (JSON-friendly): what to log and what :meth:`load` rebuilds from."""
        return {
            "estimator": self.estimator,
            "bin_s": self.bin_s,
            "input_bin_s": self.input_bin_s,
            "default_horizon_s": self.default_horizon_s,
            "quantiles": list(self.quantiles),
            "train_stride_s": self.train_stride_s,
            "min_train_rows": self.min_train_rows,
            **self._tree_params(),
            "max_gap_bins": self.max_gap_bins,
            "seed": self.seed,
        }

    def save(self, path: str | Path) -> Path:
        """Write the fitted darts models to directory ``path`` (pickled + ``meta.json``), atomically."""
        if not self._models:
            raise RuntimeError(f"cannot save an unfitted {type(self).__name__}")
        path = Path(path)
        with atomic_dir(path) as tmp:
            (tmp / "models.pkl").write_bytes(pickle.dumps(self._models))
            meta = {"kind": "darts-peak", "params": self.params(), "scale": self._scale, "fit_info": self.fit_info}
            (tmp / "meta.json").write_text(json.dumps(meta, indent=2))
        return path

    @classmethod
    def load(cls, path: str | Path, *, device: str = "cpu") -> DartsPeakForecaster:
        """Restore a model written by :meth:`save` (``device`` is accepted for a uniform interface)."""
        path = Path(path)
        meta = json.loads((path / "meta.json").read_text())
        self = cls(**dict(meta["params"], quantiles=tuple(meta["params"]["quantiles"])))
        self._models = pickle.loads((path / "models.pkl").read_bytes())
        self._scale = float(meta["scale"])
        self.fit_info = dict(meta.get("fit_info", {}))
        return self
