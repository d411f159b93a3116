"""The stage interfaces of the decision loop (DESIGN.md section 4).

Each stage is a small Protocol with a real implementation and a testing one, injected into
:class:`flinktune.decision.loop.DecisionLoop` together with a clock. Shapes:

- ``MetricsSource.fetch(job, start_ms, end_ms)`` -> raw-schema frame (see ``metric_schema``).
- ``Forecaster`` (``models.forecasting``): fit a rate series, predict a :class:`QuantileForecast`.
- ``Surrogate`` (``models.surrogate``): fit (X, rates, Y) arrays, predict :class:`SurrogatePrediction`.
- ``Policy.decide(state, context)`` -> :class:`Decision` with a reason.
- ``Guard.review(decision, state, now)`` -> the decision to carry out (possibly a hold).
- ``Realizer.apply(job, config)`` -> :class:`RealizeResult`; a no-op when nothing changes.
- ``StateStore``: durable decisions and their outcomes.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

import numpy as np
import pandas as pd

from flinktune.config_space import Configuration
from flinktune.decision import Decision, JobState
from models.forecasting.types import QuantileForecast
from models.surrogate.types import SurrogatePrediction

__all__ = [
    "MetricsSource",
    "Forecaster",
    "Surrogate",
    "PolicyContext",
    "Policy",
    "Guard",
    "RealizeResult",
    "Realizer",
    "StateStore",
]


@runtime_checkable
class MetricsSource(Protocol):
    """Samples for a job and a time range, in the raw schema."""

    def fetch(self, job: str, start_ms: int, end_ms: int) -> pd.DataFrame: ...


@runtime_checkable
class Forecaster(Protocol):
    """Fit on a rate series (DatetimeIndex, rec/s); predict a horizon with quantiles."""

    def fit(self, series: pd.Series) -> "Forecaster": ...

    def predict(self, history: pd.Series, horizon_s: int) -> QuantileForecast: ...


@runtime_checkable
class Surrogate(Protocol):
    """Fit on profiling observations; predict outcomes for candidate configurations at a rate.

    ``X`` is (n, d) normalised knobs in [0, 1], ``rates`` (n,) rec/s, ``Y`` (n, len(outcomes)) in
    each outcome's own unit.
    """

    outcomes: tuple[str, ...]

    def fit(self, X: np.ndarray, rates: np.ndarray, Y: np.ndarray) -> "Surrogate": ...

    def predict(self, X: np.ndarray, rate: float) -> SurrogatePrediction: ...


@dataclass
class PolicyContext:
    """What a policy may consult besides the job state: forecasts, models, goals, history."""

    latency_target_ms: float
    recovery_limit_s: float
    forecast: QuantileForecast | None = None
    surrogate: Surrogate | None = None
    history: pd.DataFrame | None = None
    extras: dict[str, Any] = field(default_factory=dict)


class Policy(Protocol):
    """Turns an evaluated state into a decision with a reason."""

    name: str

    def decide(self, state: JobState, context: PolicyContext) -> Decision: ...


class Guard(Protocol):
    """Safety review between plan and realize (bounds, cooldowns, holds, rollback)."""

    def review(self, decision: Decision, state: JobState, now: float) -> Decision: ...


@dataclass(frozen=True)
class RealizeResult:
    """What applying a configuration did: whether anything changed, how, and the downtime it cost."""

    changed: bool
    mode: str
    downtime_s: float = 0.0
    detail: str = ""


class Realizer(Protocol):
    """Applies a configuration to the running job."""

    def current(self, job: str) -> Configuration: ...

    def apply(self, job: str, config: Configuration) -> RealizeResult: ...


class StateStore(Protocol):
    """Durable record of decisions and their outcomes."""

    def record_decision(self, job: str, ts: float, state: JobState, decision: Decision, result: RealizeResult | None) -> int: ...

    def decisions(self, job: str, limit: int | None = None) -> pd.DataFrame: ...
