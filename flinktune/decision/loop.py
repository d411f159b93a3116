"""The decision loop: collect -> evaluate -> plan -> guard -> realize -> store.

One :meth:`DecisionLoop.step` is one decision (the decision task runs one step per interval).
Every stage is injected, so the same loop drives the twin, a local Flink cluster or Kubernetes,
and tests can swap any stage for a testing one. Profiling runs are delegated to ``profiler``
(a callable taking the configurations and the rate), because where they run depends on the
cluster (short FlinkDeployments on Kubernetes, short twin jobs in simulation).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Callable

from flinktune.analysis.explain import annotate
from flinktune.clock import Clock
from flinktune.config_space import Configuration
from flinktune.decision import Action, Decision, JobState
from flinktune.evaluation import evaluate
from flinktune.decision.guard import SafetyGuard
from flinktune.decision.stages import MetricsSource, Policy, PolicyContext, RealizeResult, Realizer

__all__ = ["DecisionLoop", "StepOutcome"]

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


@dataclass
class DecisionLoop:
    job: str
    source: MetricsSource
    realizer: Realizer
    policy: Policy
    guard: SafetyGuard
    store: object  # StateStore (record_decision)
    clock: Clock
    context: Callable[[JobState], PolicyContext]
    profiler: Callable[[list[Configuration], float], None] | None = None
    window_s: int = 600
    max_staleness_s: float = 120.0
    #: Hold when the live metrics have not moved for this long (None: no check); see ``evaluate``.
    frozen_after_s: float | None = None
    dry_run: bool = False

    def step(self) -> StepOutcome:
        now = self.clock.now()
        samples = self.source.fetch(self.job, int((now - self.window_s) * 1000), int(now * 1000) + 1)
        current = self.realizer.current(self.job)
        state = evaluate(self.job, samples, current, now, window_s=self.window_s, max_staleness_s=self.max_staleness_s,
                         frozen_after_s=self.frozen_after_s)
        ctx = self.context(state)
        planned = self.policy.decide(state, ctx)
        # Every decision quotes the bottleneck; a scale-up against key skew is held (annotate).
        decision = annotate(self.guard.review(planned, state, now), state)
        result: RealizeResult | None = None
        if not self.dry_run:
            if decision.action is Action.RECONFIGURE and decision.target is not None:
                result = self.realizer.apply(self.job, decision.target)
                if result.changed:
                    self.guard.record(now, state, decision.target)
            elif decision.action is Action.PROFILE and self.profiler is not None:
                rate = float(decision.inputs.get("planned_rate", state.input_rate))
                self.profiler(list(decision.profile_configs), rate)
        decision_id = self.store.record_decision(self.job, now, state, decision, result, dry_run=self.dry_run)  # type: ignore[attr-defined]
        outcome = StepOutcome(state, decision, result, decision_id)
        log.info("%s @%.0f %s", self.job, now, outcome.line())
        return outcome
