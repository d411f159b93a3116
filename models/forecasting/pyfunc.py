"""MLflow pyfunc wrapper for forecasters, so a registered version can be served and reloaded.

Use :class:`ForecasterPyfunc` when logging a fitted forecaster with ``models.registry``. Log it
with ``artifacts={"model": <dir written by DartsQuantileForecaster.save>}``. ``predict`` takes a
DataFrame of history rows (columns ``ts``: UTC timestamps or epoch ms, ``value``: rec/s) and
returns one row per forecast bin: ``bin_start, mean, q<level>...``. The horizon comes from
``params={"horizon_s": ...}`` or the wrapper's default. ``jobs.train_forecaster`` registers a
signature with ``ts`` as epoch milliseconds (int64) and the ``horizon_s`` param, which served
models enforce. After loading, ``.model`` is the forecaster itself (what
``models.registry.load_champion`` hands out).
"""

from __future__ import annotations

from typing import Any

import mlflow.pyfunc
import pandas as pd

from models.forecasting.types import ForecastInputError

__all__ = ["ForecasterPyfunc", "history_from_frame"]


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


class ForecasterPyfunc(mlflow.pyfunc.PythonModel):
    """Pyfunc face of a saved forecaster directory (artifact key ``"model"``)."""

    def __init__(self, horizon_s: int = 600) -> None:
        self.horizon_s = int(horizon_s)
        self.model: Any = None

    def load_context(self, context) -> None:
        from models.forecasting.darts_forecaster import DartsQuantileForecaster

        self.model = DartsQuantileForecaster.load(context.artifacts["model"], device="cpu")

    def predict(self, context, model_input: pd.DataFrame, params: dict[str, Any] | None = None) -> pd.DataFrame:
        horizon_s = int((params or {}).get("horizon_s", self.horizon_s))
        forecast = self.model.predict(history_from_frame(model_input), horizon_s)
        return forecast.to_frame()
