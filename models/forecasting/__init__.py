"""Workload forecasting: predict the input rate of the next bins with quantiles.

Every forecaster derives from ``ForecastingModel`` (fit, predict, the history it needs, save/load).
``DartsQuantileForecaster`` (TiDE, darts), ``DartsPeakForecaster`` (darts quantile regression of
the next bins and their peak from fine-grained covariates), ``DartsPeakEnsemble`` (the quantile-wise mean of two of them) and ``DirectPeakForecaster`` (boosted
quantile trees for the next bins and their peak) are the learned models, ``choose_champion`` picks
among them on the selection span, ``SeasonalNaiveForecaster`` the baseline,
``planned_rate`` turns a forecast into the rate to plan for. Names are imported lazily so that
importing this package (e.g. from an Airflow DAG file) does not pull in torch and darts.
"""

from __future__ import annotations

import importlib
from typing import Any

__all__ = [
    "DartsPeakEnsemble",
    "DartsPeakForecaster",
    "DartsQuantileForecaster",
    "DirectPeakForecaster",
    "ForecastInputError",
    "ForecastingModel",
    "QuantileForecast",
    "SeasonalNaiveForecaster",
    "choose_champion",
    "planned_rate",
    "prepare_rate_series",
]

_HOME = {
    "ForecastingModel": "models.forecasting.base",
    "DartsQuantileForecaster": "models.forecasting.darts_forecaster",
    "DartsPeakForecaster": "models.forecasting.darts_peak",
    "DartsPeakEnsemble": "models.forecasting.peak_ensemble",
    "choose_champion": "models.forecasting.champion",
    "DirectPeakForecaster": "models.forecasting.peak_forecaster",
    "SeasonalNaiveForecaster": "models.forecasting.seasonal_naive",
    "ForecastInputError": "models.forecasting.types",
    "QuantileForecast": "models.forecasting.types",
    "planned_rate": "models.forecasting.planning",
    "prepare_rate_series": "models.forecasting.series_prep",
}


def __getattr__(name: str) -> Any:
    if name in _HOME:
        return getattr(importlib.import_module(_HOME[name]), name)
    raise AttributeError(f"module 'models.forecasting' has no attribute {name!r}")
