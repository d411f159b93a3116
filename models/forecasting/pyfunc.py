"""MLflow pyfunc wrapper for forecasters, so a registered version can be served and reloaded.

Use :class:`ForecasterPyfunc` when logging a fitted forecaster with ``models.registry``. Log it
with ``artifacts={"model": <dir written by a forecaster's save>}`` (TiDE, Demeter ARIMA, ETS/Theta, direct peak, darts peak and their ensemble). ``predict`` takes a
DataFrame of history rows (columns ``ts``: UTC timestamps or epoch ms, ``value``: rec/s) and
returns one row per forecast bin: ``bin_start, mean, q<level>...``. The horizon comes from
``params={"horizon_s": ...}`` or the wrapper's default. ``jobs.train_forecaster`` registers a
signature with ``ts`` as epoch milliseconds (int64) and the ``horizon_s`` param, which served
models enforce. After loading, ``.model`` is the forecaster itself (what
``models.registry.load_champion`` hands out).
"""

from __future__ import annotations

from typing import Any

import pandas as pd
from mlflow.pyfunc import PythonModel

from models.forecasting.types import ForecastInputError

__all__ = ["ForecasterPyfunc", "history_from_frame", "load_forecaster"]

#: ``meta.json`` kind -> (module, class) of every forecaster that can be saved and registered.
_KINDS = {
    "darts-tide-quantile": ("models.forecasting.darts_forecaster", "DartsQuantileForecaster"),
    "demeter-arima": ("models.forecasting.demeter_arima", "DemeterArimaForecaster"),
    "darts-ets": ("models.forecasting.statistical", "StatisticalForecaster"),
    "darts-theta": ("models.forecasting.statistical", "StatisticalForecaster"),
    "direct-peak-gbm": ("models.forecasting.peak_forecaster", "DirectPeakForecaster"),
    "darts-peak": ("models.forecasting.darts_peak", "DartsPeakForecaster"),
    "darts-peak-ensemble": ("models.forecasting.peak_ensemble", "DartsPeakEnsemble"),
}


def load_forecaster(path: str, device: str = "cpu") -> Any:
    """Load a forecaster directory written by any forecaster's ``save`` (dispatch on ``meta.json`` kind)."""
    import importlib
    import json
    from pathlib import Path

    meta_file = Path(path) / "meta.json"
    if not meta_file.exists():
        raise FileNotFoundError(f"{path}: not a saved forecaster (no meta.json)")
    kind = json.loads(meta_file.read_text()).get("kind")
    if kind not in _KINDS:
        raise ValueError(f"{meta_file}: unknown forecaster kind {kind!r}; known: {sorted(_KINDS)}")
    module, cls = _KINDS[kind]
    return getattr(importlib.import_module(module), cls).load(path, device=device)


def history_from_frame(frame: pd.DataFrame) -> pd.Series:
    """A rate series from ``ts``/``value`` rows; ``ts`` may be datetimes (naive = UTC) or epoch ms."""
    missing = [c for c in ("ts", "value") if c not in frame.columns]
    if missing:
        raise ForecastInputError(f"forecaster input: missing column(s) {missing}; expected ['ts', 'value']")
    ts = frame["ts"]
    if pd.api.types.is_numeric_dtype(ts):
        index = pd.to_datetime(ts.to_numpy(), unit="ms", utc=True)
    else:
        index = pd.DatetimeIndex(pd.to_datetime(ts, utc=True))
    return pd.Series(frame["value"].to_numpy(), index=index, name="input_rate")


class ForecasterPyfunc(PythonModel):
    """Pyfunc face of a saved forecaster directory (artifact key ``"model"``)."""

    def __init__(self, horizon_s: int = 600) -> None:
        self.horizon_s = int(horizon_s)
        self.model: Any = None

    def load_context(self, context) -> None:
        self.model = load_forecaster(context.artifacts["model"], device="cpu")

    def predict(self, context, model_input: pd.DataFrame, params: dict[str, Any] | None = None) -> pd.DataFrame:
        horizon_s = int((params or {}).get("horizon_s", self.horizon_s))
        forecast = self.model.predict(history_from_frame(model_input), horizon_s)
        return forecast.to_frame()
