"""The production model and forecast providers of a decision loop: the job's MLflow champions and
the input rate in the raw lake. Use :class:`ChampionModels` (a ``ModelProvider``) and
:class:`LakeForecast` (a ``ForecastProvider``) where a decide run reads the registry (every cluster;
the twin too unless its models come from a file). An unreachable model store is a
:class:`~flinktune.decision.stages.StageProblem`, so the loop holds and says why; a missing champion
is the policy's business.
"""

from __future__ import annotations

import logging
from typing import Any

import numpy as np

from flinktune.decision.evaluation import rate_series
from flinktune.lake import PROFILING_OBSERVATIONS, Lake
from models.forecasting.types import QuantileForecast

__all__ = ["FORECAST_HISTORY_S", "ChampionModels", "LakeForecast", "load_champion", "profiled_max_rate"]

log = logging.getLogger(__name__)

#: How much input-rate history the forecaster sees at predict time.
FORECAST_HISTORY_S = 6 * 3600


def load_champion(name: str) -> tuple[Any | None, str | None]:
    """(the champion or None, the problem when the model store itself failed). A missing champion is
    the policy's business (it says so); an unreachable store is a hold with its reason (the loop adds
    it to the state's problems), reported within MLflow's request timeout, not as "no champion"."""
    from models.registry import ModelStoreUnavailable
    from models.registry import load_champion as load

    try:
        return load(name), None
    except ModelStoreUnavailable as exc:
        log.warning("model store unavailable for %s: %s", name, exc)
        return None, f"model store unreachable: {exc}"
    except Exception as exc:  # a missing champion is a hold, not a crash: the guard says why
        log.warning("no champion %s: %s", name, exc)
        return None, None


def profiled_max_rate(lake: Lake, job: str) -> float:
    """The highest input rate ``job``'s profiling observations in ``lake`` cover (0 before any)."""
    frames = lake.read_dataset(PROFILING_OBSERVATIONS, job, columns=["input_rate"])
    if not frames:
        return 0.0
    rates = np.concatenate([f["input_rate"].to_numpy(dtype=float) for f in frames])
    return float(np.nanmax(rates)) if rates.size else 0.0


class ChampionModels:
    """The ``ModelProvider`` of a decide run: the job's champion surrogate and the reach of its
    profiling observations in the lake; :meth:`refresh` reloads both (after profiling retrained)."""

    surrogate: Any | None
    problem: str | None
    profiled_max_rate: float

    def __init__(self, lake: Lake, job: str) -> None:
        self.lake, self.job = lake, job
        self.refresh()

    def refresh(self) -> None:
        self.surrogate, self.problem = load_champion(f"flinktune-surrogate-{self.job}")
        self.profiled_max_rate = profiled_max_rate(self.lake, self.job)


class LakeForecast:
    """The ``ForecastProvider`` of a decide run: the champion forecaster over the last
    :data:`FORECAST_HISTORY_S` of the job's input rate in the raw lake."""

    def __init__(self, lake: Lake, job: str, horizon_s: int) -> None:
        self.lake, self.horizon_s = lake, int(horizon_s)
        self.model, self.problem = load_champion(f"flinktune-forecaster-{job}")

    def forecast(self, job: str, now: float) -> QuantileForecast | None:
        if self.model is None:
            return None
        now_ms = int(now * 1000)
        hist = self.lake.read_raw(job, now_ms - FORECAST_HISTORY_S * 1000, now_ms + 1, metrics=["workloadRate"])
        forecast: QuantileForecast = self.model.predict(rate_series(hist, job), self.horizon_s)
        return forecast
