"""The decision loop: collect -> evaluate -> plan -> guard -> realize -> store.

One :meth:`DecisionLoop.step` is one decision (the decision task runs one step per interval, each
in a new process). Build it with :func:`build_decision_loop`, the one assembly the decide job, the
replay and the local-Flink benchmark share: the cluster's stages come from a
:class:`~flinktune.backends.Backend`, the forecast, the models and the profiler are stages injected
by the constructor, and everything a decision depends on that earlier decisions set (the guard's
change history, the policy's memory) is read back from the state store, so a loop rebuilt for every
tick decides as one kept alive would.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from flinktune.analysis.explain import annotate
from flinktune.backends import Backend
from flinktune.clock import Clock
from flinktune.decision.decision import Action, Decision, JobState
from flinktune.decision.guard import GuardRules, SafetyGuard
from flinktune.decision.stages import (
    ForecastProvider, MetricsSource, ModelProvider, Policy, PolicyContext, PolicyMemory, Profiler, RealizeResult, Realizer,
)
from flinktune.evaluation import evaluate
from flinktune.config_space import ConfigSpace

__all__ = ["DecisionLoop", "LoopSettings", "StepOutcome", "build_decision_loop"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class StepOutcome:
    """What one step saw, decided and did."""

    state: JobState
    decision: Decision
    result: RealizeResult | None
    decision_id: int

    def line(self) -> str:
        done = ""
        if self.result is not None and self.result.changed:
            done = f" [{self.result.mode}, {self.result.downtime_s:.0f} s down]"
        return f"{self.decision.action.value}: {self.decision.reason}{done}"


@dataclass(frozen=True)
class LoopSettings:
    """How one job's loop decides: its goals and its evaluation window (seconds, ms).

    ``window_s`` is the history each decision evaluates (the decision interval);
    ``max_staleness_s`` how old the newest sample may be; ``frozen_after_s`` holds when the live
    metrics have not moved for that long (None: no check; see ``evaluate``). A ``dry_run`` loop
    decides and records but changes nothing, its policy's memory included.
    """

    job: str
    latency_target_ms: float
    recovery_limit_s: float = 180.0
    window_s: int = 600
    max_staleness_s: float = 120.0
    frozen_after_s: float | None = None
    dry_run: bool = False

    def __post_init__(self) -> None:
        if not self.job:
            raise ValueError("loop settings: job must be a non-empty name")
        if self.window_s <= 0 or self.max_staleness_s <= 0:
            raise ValueError(f"loop settings: window_s and max_staleness_s must be > 0, got {self.window_s} and {self.max_staleness_s}")


@dataclass
class DecisionLoop:
    """One job's loop; see the module docstring. Use :func:`build_decision_loop` to make one."""

    settings: LoopSettings
    source: MetricsSource
    realizer: Realizer
    policy: Policy
    guard: SafetyGuard
    store: object  # StateStore (record_decision, record_forecast)
    clock: Clock
    forecaster: ForecastProvider | None = None
    models: ModelProvider | None = None
    profiler: Profiler | None = None

    @property
    def job(self) -> str:
        return self.settings.job

    def context(self, state: JobState) -> PolicyContext:
        """What the policy may consult besides the state: the goals, the forecast and the models."""
        s = self.settings
        ctx = PolicyContext(latency_target_ms=s.latency_target_ms, recovery_limit_s=s.recovery_limit_s)
        if self.forecaster is not None:
            ctx.forecast = self.forecaster.forecast(s.job, state.ts)
        if self.models is not None:
            ctx.surrogate = self.models.surrogate
            ctx.extras["profiled_max_rate"] = self.models.profiled_max_rate
        return ctx

    def step(self) -> StepOutcome:
        s = self.settings
        now = self.clock.now()
        samples = self.source.fetch(s.job, int((now - s.window_s) * 1000), int(now * 1000) + 1)
        current = self.realizer.current(s.job)
        state = evaluate(s.job, samples, current, now, window_s=s.window_s, max_staleness_s=s.max_staleness_s,
                         frozen_after_s=s.frozen_after_s)  # fmt: skip
        ctx = self.context(state)
        planned = self.policy.decide(state, ctx)
        # The guard has the last word (the skew hold is one of its rules); the analysis only quotes.
        decision = annotate(self.guard.review(planned, state, now), state)
        result: RealizeResult | None = None
        if not s.dry_run:
            if decision.action is Action.RECONFIGURE and decision.target is not None:
                result = self.realizer.apply(s.job, decision.target)
                if result.changed:
                    self.guard.record(now, state, decision.target)
            elif decision.action is Action.PROFILE and self.profiler is not None:
                rate = float(decision.inputs.get("planned_rate", state.input_rate))
                self.profiler.profile(list(decision.profile_configs), rate, now)
                if self.models is not None:
                    self.models.refresh()
        # The policy's memory goes in the same transaction as the decision it led to.
        memory = (self.policy.name, self.policy.memory()) if isinstance(self.policy, PolicyMemory) and not s.dry_run else None
        decision_id = self.store.record_decision(s.job, now, state, decision, result, dry_run=s.dry_run, memory=memory)  # type: ignore[attr-defined]
        if ctx.forecast is not None and decision.inputs.get("planned_rate") is not None and hasattr(self.store, "record_forecast"):
            self.store.record_forecast(s.job, now, ctx.forecast.model, float(decision.inputs["planned_rate"]), ctx.forecast.to_frame())
        outcome = StepOutcome(state, decision, result, decision_id)
        log.info("%s @%.0f %s", s.job, now, outcome.line())
        return outcome


def build_decision_loop(
    backend: Backend,
    settings: LoopSettings,
    *,
    policy: Policy,
    space: ConfigSpace,
    store: object,
    guard_rules: GuardRules | None = None,
    forecaster: ForecastProvider | None = None,
    models: ModelProvider | None = None,
) -> DecisionLoop:
    """The decision loop of ``settings.job`` on ``backend``, with its memory restored from ``store``.

    The guard's change history and, for a policy with memory (:class:`PolicyMemory`), the memory
    saved with the job's last decision are read back, so a fresh process continues where the last
    one stopped. ``space`` bounds the guard; ``forecaster`` and ``models`` are None for policies
    that need no models (the loop then gives the policy none).
    """
    history = store.decisions(settings.job)  # type: ignore[attr-defined]
    guard = SafetyGuard(space, settings.latency_target_ms, guard_rules or GuardRules()).restore(history)
    if isinstance(policy, PolicyMemory):
        memory = store.policy_memory(settings.job, policy.name)  # type: ignore[attr-defined]
        if memory is not None:
            policy.restore_memory(memory)
    return DecisionLoop(settings, backend.source, backend.realizer, policy, guard, store, backend.clock,
                        forecaster=forecaster, models=models, profiler=backend.profiler)  # fmt: skip
