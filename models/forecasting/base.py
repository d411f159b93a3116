"""The base class of every input-rate forecaster: what training, backtests and serving may rely on.

Derive every forecaster in :mod:`models.forecasting` from :class:`ForecastingModel`. The training
job (``jobs.train_forecaster``) and the backtest (:mod:`models.forecasting.backtest`) read these
members instead of probing objects for attributes:

- ``name`` (str): the model's kind, as logged and as :func:`models.forecasting.pyfunc.load_forecaster`
  dispatches on; ``bin_s`` (int): seconds per forecast bin.
- :meth:`fit` (a UTC-indexed rate series, rec/s) and :meth:`predict` (history, ``horizon_s``) ->
  :class:`~models.forecasting.types.QuantileForecast` of ``ceil(horizon_s / bin_s)`` bins.
- :attr:`min_fit_bins`: bins of history :meth:`fit` needs; :attr:`predict_bins`: bins of history
  :meth:`predict` reads (0: whatever it is given).
- :meth:`params`: JSON-friendly constructor arguments (what a refit from the registry rebuilds).
- :meth:`historical_forecasts`: one forecast per origin; the default calls :meth:`predict` per
  origin, models with a batched path override it.
- ``registrable``: whether :meth:`save` / :meth:`load` work, i.e. whether the model can be
  registered and served; a yardstick (seasonal naive) says False and is never registered.

A model fitted for one horizon (``default_horizon_s``) also derives from :class:`TrainedHorizon`.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from pathlib import Path
from typing import Any, ClassVar

import pandas as pd

from models.forecasting.types import ForecastInputError, QuantileForecast

__all__ = ["ForecastingModel", "TrainedHorizon"]


class ForecastingModel(ABC):
    """An input-rate forecaster: fit on a rate series, predict quantiles of the next bins."""

    name: str
    bin_s: int
    #: True when :meth:`save` and :meth:`load` work (the model can be registered and served).
    registrable: ClassVar[bool] = True
    #: True when :meth:`historical_forecasts` also batches inputs finer than the backtest's bins.
    reads_any_resolution: ClassVar[bool] = False

    @abstractmethod
    def fit(self, series: pd.Series) -> ForecastingModel:
        """Learn from ``series`` (UTC DatetimeIndex, rec/s); returns self."""

    @abstractmethod
    def predict(self, history: pd.Series, horizon_s: int) -> QuantileForecast:
        """Forecast ``ceil(horizon_s / bin_s)`` bins after the end of ``history``."""

    @property
    @abstractmethod
    def min_fit_bins(self) -> int:
        """Bins of history :meth:`fit` needs (a shorter series raises ``ForecastInputError``)."""

    @property
    def predict_bins(self) -> int:
        """Bins of history :meth:`predict` reads; 0 when it reads whatever it is given."""
        return 0

    @abstractmethod
    def params(self) -> dict[str, Any]:
        """Constructor arguments (JSON-friendly): what to log and what a refit rebuilds the model from."""

    def historical_forecasts(self, series: pd.Series, origins: pd.DatetimeIndex, horizon_s: int) -> list[QuantileForecast]:
        """One forecast per origin, each from the history of ``series`` before it (override to batch)."""
        return [self.predict(series[series.index < o], horizon_s) for o in origins]

    def save(self, path: str | Path) -> Path:
        """Write the fitted model to directory ``path`` (``meta.json`` names its kind); returns the path."""
        raise NotImplementedError(f"forecaster {self.name!r} cannot be saved (registrable=False)")

    @classmethod
    def load(cls, path: str | Path, *, device: str = "cpu") -> ForecastingModel:
        """Restore a model written by :meth:`save`."""
        raise NotImplementedError(f"{cls.__name__} cannot be loaded (registrable=False)")


class TrainedHorizon:
    """A forecaster fitted for one horizon, ``default_horizon_s``, in bins of ``bin_s``."""

    bin_s: int
    default_horizon_s: int

    @property
    def horizon_bins(self) -> int:
        return math.ceil(self.default_horizon_s / self.bin_s)

    def _trained_bins(self, horizon_s: int) -> int:
        """The bins of a forecast of ``horizon_s``; ForecastInputError unless 0 < ``horizon_s`` <= the trained horizon."""
        if horizon_s <= 0:
            raise ForecastInputError(f"horizon_s must be positive, got {horizon_s}")
        n = math.ceil(horizon_s / self.bin_s)
        if n > self.horizon_bins:
            raise ForecastInputError(
                f"horizon of {n} bins exceeds the trained horizon of {self.horizon_bins} bins "
                f"(default_horizon_s={self.default_horizon_s}); refit with a longer default_horizon_s"
            )
        return n
