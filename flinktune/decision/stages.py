"""The stage interfaces of the decision loop (docs/DESIGN.md section 4).

Each stage is a small Protocol with a real implementation and a testing one, injected into
:class:`flinktune.decision.loop.DecisionLoop` together with a clock. Shapes:

- ``MetricsSource.fetch(job, start_ms, end_ms)`` -> raw-schema frame (see ``metric_schema``); a source
  that must tell the decision's reader how its last fetch was served (the lake alone, its live part
  out of reach) is a :class:`SourceNote`.
- ``Forecaster`` (``models.forecasting``): fit a rate series, predict a :class:`QuantileForecast`.
- ``Surrogate`` (``models.surrogate``): fit (X, rates, Y) arrays, predict :class:`SurrogatePrediction`.
- ``ForecastProvider.forecast(job, now)`` -> the rate forecast the policy plans with (or None).
- ``ModelProvider``: the current surrogate and how far profiling reached; ``refresh()`` after profiling.
  One that also serves its profiles is a :class:`ProfileBook`; a provider that cannot serve says why
  (:class:`StageProblem`).
- ``Profiler.profile(configs, rate, now)``: short profiling runs where the cluster runs them.
- ``Policy.decide(state, context)`` -> :class:`Decision` with a reason; a policy with memory
  (:class:`PolicyMemory`) has it saved beside each decision and restored by the next run.
- ``Guard.review(decision, state, now)`` -> the decision to carry out (possibly a hold).
- ``Realizer.apply(job, config)`` -> :class:`RealizeResult`; a no-op when nothing changes.
- ``StateStore``: durable decisions and their outcomes.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

import numpy as np
import pandas as pd

from flinktune.config_space import Configuration
from flinktune.decision import Decision, JobState
from flinktune.decision.reconfig import ReconfigMode
from models.forecasting.types import QuantileForecast
from models.surrogate.types import SurrogatePrediction

__all__ = [
    "ControllerAware",
    "DecisionOutcome",
    "DecisionRecord",
    "ForecastProvider",
    "Forecaster",
    "Guard",
    "MetricsSource",
    "ModelProvider",
    "PatchPreview",
    "Policy",
    "PolicyContext",
    "PolicyMemory",
    "ProfileBook",
    "Profiler",
    "RealizeResult",
    "Realizer",
    "ReconfigMode",
    "SourceNote",
    "StageProblem",
    "StateStore",
    "Surrogate",
]


@runtime_checkable
class MetricsSource(Protocol):
    """Samples for a job and a time range, in the raw schema."""

    def fetch(self, job: str, start_ms: int, end_ms: int) -> pd.DataFrame: ...


@runtime_checkable
class SourceNote(Protocol):
    """A metrics source whose last fetch left something the decision's reason must say (its live part
    unreachable, the decision made on the lake alone): ``note``, or None. The loop appends it."""

    note: str | None


@runtime_checkable
class Forecaster(Protocol):
    """Fit on a rate series (DatetimeIndex, rec/s); predict a horizon with quantiles."""

    def fit(self, series: pd.Series) -> Forecaster: ...

    def predict(self, history: pd.Series, horizon_s: int) -> QuantileForecast: ...


@runtime_checkable
class Surrogate(Protocol):
    """Fit on profiling observations; predict outcomes for candidate configurations at a rate.

    ``X`` is (n, d) normalised knobs in [0, 1], ``rates`` (n,) rec/s, ``Y`` (n, len(outcomes)) in
    each outcome's own unit.
    """

    outcomes: tuple[str, ...]

    def fit(self, X: np.ndarray, rates: np.ndarray, Y: np.ndarray) -> Surrogate: ...

    def predict(self, X: np.ndarray, rate: float) -> SurrogatePrediction: ...


class ForecastProvider(Protocol):
    """The forecast a policy plans with at ``now`` (epoch s): a fitted model over the rate history
    the cluster shows; None while there is no model or too little history (the policy holds)."""

    def forecast(self, job: str, now: float) -> QuantileForecast | None: ...


class ModelProvider(Protocol):
    """The learned models a policy consults besides the forecast.

    ``surrogate`` is None while there is no champion; ``profiled_max_rate`` (rec/s) is the highest
    rate profiling covered (0 before any). The loop calls :meth:`refresh` after a profile decision
    was carried out, so the next decision sees the retrained surrogate.
    """

    @property
    def surrogate(self) -> Surrogate | None: ...

    @property
    def profiled_max_rate(self) -> float: ...

    def refresh(self) -> None: ...


@runtime_checkable
class ProfileBook(Protocol):
    """A :class:`ModelProvider` that also serves what was profiled, for policies whose rules read the
    profiles themselves (Demeter's per-chunk models): ``observations`` (configuration, rate and
    outcomes, one row per profiling run; None before any) and a surrogate fitted on any selection
    of those rows."""

    @property
    def observations(self) -> pd.DataFrame | None: ...

    def fit_surrogate(self, rows: pd.DataFrame) -> Surrogate: ...


@runtime_checkable
class StageProblem(Protocol):
    """A provider that can be unable to serve (a model store out of reach): ``problem`` says why, or
    is None. The loop adds it to the state's problems, so the guard holds."""

    problem: str | None


class Profiler(Protocol):
    """Runs short profiling jobs of ``configs`` at ``rate`` rec/s (``now``: epoch s of the decision)."""

    def profile(self, configs: list[Configuration], rate: float, now: float) -> Any: ...


@runtime_checkable
class PolicyMemory(Protocol):
    """A policy whose decisions depend on what it saw before (measured capacities, dwell times,
    budgets, pending changes). :meth:`memory` is a JSON-serialisable dict; :meth:`restore_memory`
    takes one back, so one decision per process decides as one long-lived object would."""

    name: str

    def memory(self) -> dict[str, Any]: ...

    def restore_memory(self, memory: dict[str, Any]) -> None: ...


@dataclass
class PolicyContext:
    """What a policy may consult besides the job state: forecasts, models, goals, history.

    ``profiled_max_rate`` (rec/s) is the highest rate profiling covered (0 before any);
    ``observations`` and ``fit_surrogate`` are a :class:`ProfileBook`'s, None where the models
    provider has none. ``profiling_budget`` (cores, MiB) caps what the tuner's profiling runs may
    reserve (None: the space's own budget, its static maximum's totals).
    """

    latency_target_ms: float
    recovery_limit_s: float
    forecast: QuantileForecast | None = None
    surrogate: Surrogate | None = None
    history: pd.DataFrame | None = None
    profiled_max_rate: float = 0.0
    observations: pd.DataFrame | None = None
    fit_surrogate: Callable[[pd.DataFrame], Surrogate] | None = None
    profiling_budget: tuple[float, float] | None = None


class Policy(Protocol):
    """Turns an evaluated state into a decision with a reason."""

    name: str

    def decide(self, state: JobState, context: PolicyContext) -> Decision: ...


class Guard(Protocol):
    """Safety review between plan and realize (bounds, cooldowns, holds, rollback)."""

    def review(self, decision: Decision, state: JobState, now: float) -> Decision: ...


@dataclass(frozen=True)
class RealizeResult:
    """What applying a configuration did: whether anything changed, how (one :class:`ReconfigMode`
    for every realizer), and the downtime it cost (s)."""

    changed: bool
    mode: ReconfigMode
    downtime_s: float = 0.0
    detail: str = ""

    def __post_init__(self) -> None:
        # A mode given by its stored value ("redeploy") becomes the enum, so callers compare members only.
        if not isinstance(self.mode, ReconfigMode):
            try:
                object.__setattr__(self, "mode", ReconfigMode(self.mode))
            except ValueError:
                known = ", ".join(m.value for m in ReconfigMode)
                raise ValueError(f"RealizeResult.mode: {self.mode!r} is not a reconfiguration mode ({known})") from None


class Realizer(Protocol):
    """Applies a configuration to the running job."""

    def current(self, job: str) -> Configuration: ...

    def apply(self, job: str, config: Configuration) -> RealizeResult: ...


@runtime_checkable
class ControllerAware(Protocol):
    """A realizer that sees whether another controller sizes the job: ``held`` is why it must not act
    (the loop holds with it), None while the job is flinktune's alone."""

    held: str | None


@runtime_checkable
class PatchPreview(Protocol):
    """A realizer whose dry run computes the change it would make: ``last_diff`` is the last one as a
    diff (empty when it changed nothing), what a dry decide run prints."""

    last_diff: str


@dataclass(frozen=True)
class DecisionRecord:
    """One decision as the state store keeps it: the job, when it was made (s), the state it was made
    on, the decision, and what applying it did (None when nothing was applied). ``status`` None takes
    the status from ``result``; ``"intended"`` writes a change ahead of its apply. ``error`` says what
    stopped it, if anything."""

    job: str
    ts: float
    state: JobState
    decision: Decision
    result: RealizeResult | None
    dry_run: bool = False
    status: str | None = None
    error: str | None = None


@dataclass(frozen=True)
class DecisionOutcome:
    """How a decision written ahead ended: what applying it did (None when nothing was applied), its
    status (``applied``, ``failed``, ``rolled-back``, ...) and what stopped it, if anything."""

    result: RealizeResult | None
    status: str
    error: str | None = None


class StateStore(Protocol):
    """Durable record of decisions and their outcomes, and of the policy memory saved with them."""

    def record_decision(self, record: DecisionRecord, *, memory: tuple[str, dict[str, Any]] | None = None) -> int: ...

    def update_decision(
        self, decision_id: int, outcome: DecisionOutcome, *, memory: tuple[str, dict[str, Any]] | None = None
    ) -> None: ...

    def policy_memory(self, job: str, policy: str) -> dict[str, Any] | None: ...

    def decisions(self, job: str, limit: int | None = None) -> pd.DataFrame: ...
