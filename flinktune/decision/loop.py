"""The decision loop: collect -> evaluate -> plan -> guard -> realize -> store.

One :meth:`DecisionLoop.step` is one decision (the decision task runs one step per interval, each
in a new process). Build it with :func:`build_decision_loop`, the one assembly the decide job, the
replay and the local-Flink benchmark share: the cluster's stages come from a
:class:`~flinktune.backends.Backend`, the forecast, the models and the profiler are stages injected
by the constructor, and everything a decision depends on that earlier decisions set (the guard's
change history, the policy's memory) is read back from the state store, so a loop rebuilt for every
tick decides as one kept alive would.

A change is written ahead (stored as ``intended`` before the realizer runs, then settled as
applied, failed or rolled back with the error), and each step starts by reconciling the store's
last record with what the cluster runs (:meth:`DecisionLoop.reconcile`), so a run that died or
failed half-way never makes the next one act blind: the guard counts the attempt and holds for the
stabilization window. A cluster that cannot be read, or a model store that cannot be reached, is a
hold that says so, never a crash without a row.
"""

from __future__ import annotations

import json
import logging
import math
from dataclasses import dataclass, replace

from flinktune.clock import Clock
from flinktune.config_space import ConfigSpace, Configuration
from flinktune.decision.backend import Backend
from flinktune.decision.decision import Action, Decision, JobState
from flinktune.decision.evaluation import evaluate
from flinktune.decision.explain import annotate
from flinktune.decision.guard import GuardRules, SafetyGuard
from flinktune.decision.reconfig import ReconfigMode, same_shape
from flinktune.decision.stages import (
    ControllerAware,
    DecisionOutcome,
    DecisionRecord,
    ForecastProvider,
    MetricsSource,
    ModelProvider,
    Policy,
    PolicyContext,
    PolicyMemory,
    ProfileBook,
    Profiler,
    Realizer,
    RealizeResult,
    SourceNote,
    StageProblem,
    StateStore,
)
from flinktune.decision.store import UNSETTLED

__all__ = ["ClusterUnreadable", "DecisionLoop", "LoopSettings", "StepOutcome", "build_decision_loop"]


class ClusterUnreadable(ConnectionError):
    """The cluster cannot be read and nothing is stored yet to hold on (the job's first run)."""


def _problem(stage: object) -> str | None:
    """Why a provider cannot serve (:class:`StageProblem`), or None."""
    return stage.problem if isinstance(stage, StageProblem) else None


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split()) or type(exc).__name__
    return f"{type(exc).__name__}: {text[:300]}"


def _expected(row) -> Configuration:
    """What the store's row says the cluster runs after it (a settled row only)."""
    state = json.loads(row.state)
    if row.target and (row.status in ("applied", "reconciled") or (row.status is None and int(row.changed))):
        return Configuration.from_dict(json.loads(row.target), where=f"decision {row.id}")
    return Configuration.from_dict(state["config"], where=f"decision {row.id}")


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
        elif self.result is not None and self.result.detail and self.result.mode is not ReconfigMode.DRY_RUN:
            done = f" [not applied: {self.result.detail}]"  # a failure or rollback says why on the same line
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
            raise ValueError(
                f"loop settings: window_s and max_staleness_s must be > 0, got {self.window_s} and {self.max_staleness_s}"
            )


@dataclass
class DecisionLoop:
    """One job's loop; see the module docstring. Use :func:`build_decision_loop` to make one."""

    settings: LoopSettings
    source: MetricsSource
    realizer: Realizer
    policy: Policy
    guard: SafetyGuard
    store: StateStore
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
            ctx.profiled_max_rate = self.models.profiled_max_rate
            if isinstance(self.models, ProfileBook):  # policies whose rules read the profiles themselves
                ctx.observations = self.models.observations
                ctx.fit_surrogate = self.models.fit_surrogate
        return ctx

    def step(self, trigger: str | None = None, window_s: int | None = None) -> StepOutcome:
        """One decision. ``trigger``: why it is made before its interval ran out (a
        :mod:`flinktune.decision.watch` alarm's reason); the decision's reason and inputs say so.
        ``window_s``: the history it evaluates, when not the interval (an early decision reads the
        minutes that raised the alarm, not an interval's mean that a step in the load has not moved yet)."""
        s = self.settings
        now = self.clock.now()
        try:
            current = self.realizer.current(s.job)
        except Exception as exc:  # an unreadable cluster is a hold with its reason, never a crash without a row
            return self._hold_blind(now, f"cannot read the job's configuration from the cluster ({_one_line(exc)})")
        window = int(window_s or s.window_s)
        samples = self.source.fetch(s.job, int((now - window) * 1000), int(now * 1000) + 1)
        state = evaluate(
            s.job, samples, current, now, window_s=window, max_staleness_s=s.max_staleness_s, frozen_after_s=s.frozen_after_s
        )
        held = self.realizer.held if isinstance(self.realizer, ControllerAware) else None
        if held:  # one controller per job: another one sizes it (flinktune.kubernetes.controllers)
            return self._hold_for(now, state, str(held))
        # A model store that cannot be reached is a problem of the data the decision stands on: the guard holds.
        stage_problems = tuple(p for p in (_problem(self.models), _problem(self.forecaster)) if p)
        if stage_problems:
            state = replace(state, problems=state.problems + stage_problems)
        if not s.dry_run:
            self.reconcile(now, state)
        ctx = self.context(state)
        planned = self.policy.decide(state, ctx)
        # The guard has the last word (the skew hold is one of its rules); the analysis only quotes.
        decision = annotate(self.guard.review(planned, state, now), state)
        if trigger:
            decision = replace(
                decision,
                reason=f"{decision.reason} [decided before the next interval: {trigger}]",
                inputs={**decision.inputs, "trigger": trigger},
            )
        note = self.source.note if isinstance(self.source, SourceNote) else None
        if note:  # how the metrics were served, when the reader must know (the lake alone, its live part out of reach)
            decision = replace(decision, reason=f"{decision.reason} [{note}]", inputs={**decision.inputs, "metrics_note": note})
        # The policy's memory goes in the same transaction as the decision it led to.
        memory = (self.policy.name, self.policy.memory()) if isinstance(self.policy, PolicyMemory) and not s.dry_run else None
        result: RealizeResult | None = None
        if not s.dry_run and decision.action is Action.RECONFIGURE and decision.target is not None:
            decision_id, result = self._apply(now, state, decision, memory)
        else:
            if not s.dry_run and decision.action is Action.PROFILE and self.profiler is not None:
                # A policy may name the rate its profiling runs see (Demeter's read the live input).
                rate = float(decision.inputs.get("profile_rate", decision.inputs.get("planned_rate", state.input_rate)))
                try:
                    self.profiler.profile(list(decision.profile_configs), rate, now)
                except Exception as exc:  # the row first, then the failure goes on to the task
                    self.store.record_decision(
                        DecisionRecord(
                            s.job, now, state, decision, None, status="failed", error=f"profiling failed: {_one_line(exc)}"
                        ),
                        memory=memory,
                    )
                    raise
                if self.models is not None:
                    self.models.refresh()
            decision_id = self.store.record_decision(
                DecisionRecord(s.job, now, state, decision, result, dry_run=s.dry_run), memory=memory
            )
        if (
            ctx.forecast is not None
            and decision.inputs.get("planned_rate") is not None
            and hasattr(self.store, "record_forecast")
        ):
            self.store.record_forecast(
                s.job, now, ctx.forecast.model, float(decision.inputs["planned_rate"]), ctx.forecast.to_frame()
            )
        outcome = StepOutcome(state, decision, result, decision_id)
        log.info("%s @%.0f %s", s.job, now, outcome.line())
        return outcome

    def _apply(self, now: float, state: JobState, decision: Decision, memory) -> tuple[int, RealizeResult]:
        """Write the change ahead, apply it, settle the row: applied, rolled back or failed with the error."""
        job, target = self.settings.job, decision.target
        assert target is not None  # only reconfigure decisions with a target come here
        decision_id = self.store.record_decision(DecisionRecord(job, now, state, decision, None, status="intended"))
        error: str | None = None
        try:
            result = self.realizer.apply(job, target)
        except Exception as exc:  # the change may have landed (e.g. a PATCH that succeeded, then a failed read)
            error = f"applying {target.describe()} failed: {_one_line(exc)}; the change may have landed: the next run reconciles"
            result = RealizeResult(False, ReconfigMode.NOOP, 0.0, error)
            status = "failed"
        else:
            if result.changed:
                status = "applied"
            elif result.mode is ReconfigMode.ROLLED_BACK:
                status, error = "rolled-back", result.detail
            else:
                status = "recorded"
        if status == "applied":
            self.guard.record(now, state, target, float(decision.inputs.get("settle_s") or 0.0))
        elif status in ("failed", "rolled-back"):
            self.guard.record_attempt(now, state, target)
        self.store.update_decision(decision_id, DecisionOutcome(result, status, error), memory=memory)
        if error:
            log.warning("%s @%.0f %s", job, now, error)
        return decision_id, result

    def reconcile(self, now: float, state: JobState) -> str | None:
        """Compare the store's last record with what the cluster runs (``state.config``); settle a
        change left ``intended`` or ``failed`` by the cluster's answer, and record any other
        difference as a ``reconciled`` row (it counts as a change for the guard). Returns what it
        recorded, None when store and cluster agreed."""
        rows = self.store.decisions(self.settings.job, limit=1)
        if rows.empty:
            return None
        row = rows.iloc[-1]
        status = row.get("status") if "status" in rows else None
        current = state.config
        note = None
        if status in UNSETTLED and row.target:
            target = Configuration.from_dict(json.loads(row.target), where=f"decision {row.id}")
            before = Configuration.from_dict(json.loads(row.state)["config"], where=f"decision {row.id}")
            why = row.error or "the task stopped during the apply"
            if current == target:
                note = f"{why}; reconciled at t={now:.0f}: the cluster runs the target, so the change landed"
                mode = ReconfigMode.IN_PLACE if same_shape(before, target) else ReconfigMode.REDEPLOY
                self.store.update_decision(int(row.id), DecisionOutcome(RealizeResult(True, mode, 0.0, note), "applied", note))
                return note
            if current == before:
                if status == "intended":
                    note = f"{why}; reconciled at t={now:.0f}: the cluster still runs {before.describe()}"
                    self.store.update_decision(int(row.id), DecisionOutcome(None, "failed", note))
                return note
            neither = f"{why}; reconciled at t={now:.0f}: the cluster runs neither the target nor the configuration before"
            self.store.update_decision(int(row.id), DecisionOutcome(None, "failed", neither))
            expected = before
        else:
            expected = _expected(row)
        if current == expected:
            return note
        reason = (
            f"reconciled: the cluster runs {current.describe()} but the store's last record (decision {row.id}, "
            f"{status or 'recorded'}) says {expected.describe()}; recorded the difference, counted as a change"
        )
        before_state = replace(state, config=expected)
        self.store.record_decision(
            DecisionRecord(
                self.settings.job,
                now,
                before_state,
                Decision(
                    Action.KEEP,
                    reason,
                    "reconcile",
                    target=current,
                    inputs={"expected": expected.to_dict(), "observed": current.to_dict(), "decision_id": int(row.id)},
                ),
                None,
                status="reconciled",
                error=reason,
            )
        )
        self.guard.record_attempt(now, before_state, current)
        log.warning("%s @%.0f %s", self.settings.job, now, reason)
        return reason

    def _hold_for(self, now: float, state: JobState, why: str) -> StepOutcome:
        """A hold that no policy or guard can lift: recorded with its reason, nothing planned or applied."""
        decision = Decision.keep("guard", f"hold: {why}", held_by="another controller")
        decision_id = self.store.record_decision(
            DecisionRecord(self.settings.job, now, state, decision, None, dry_run=self.settings.dry_run)
        )
        outcome = StepOutcome(state, decision, None, decision_id)
        log.warning("%s @%.0f %s", self.settings.job, now, outcome.line())
        return outcome

    def _hold_blind(self, now: float, problem: str) -> StepOutcome:
        """A hold recorded without the cluster's answer, on the configuration the store last knew."""
        s = self.settings
        rows = self.store.decisions(s.job, limit=1)
        if rows.empty:
            raise ClusterUnreadable(f"job {s.job!r}: {problem}; nothing is stored yet to hold on")
        nan = math.nan
        state = JobState(
            s.job,
            now,
            _expected(rows.iloc[-1]),
            False,
            nan,
            nan,
            nan,
            nan,
            nan,
            nan,
            nan,
            nan,
            nan,
            s.window_s,
            fresh=False,
            problems=(problem,),
        )
        decision = self.guard.review(Decision.keep("guard", f"hold: {problem}"), state, now)
        decision_id = self.store.record_decision(
            DecisionRecord(s.job, now, state, decision, None, dry_run=s.dry_run, error=problem)
        )
        outcome = StepOutcome(state, decision, None, decision_id)
        log.warning("%s @%.0f %s", s.job, now, outcome.line())
        return outcome


def build_decision_loop(
    backend: Backend,
    settings: LoopSettings,
    *,
    policy: Policy,
    space: ConfigSpace,
    store: StateStore,
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
    history = store.decisions(settings.job)
    guard = SafetyGuard(space, settings.latency_target_ms, guard_rules or GuardRules()).restore(history)
    if isinstance(policy, PolicyMemory):
        memory = store.policy_memory(settings.job, policy.name)
        if memory is not None:
            policy.restore_memory(memory)
    return DecisionLoop(
        settings,
        backend.source,
        backend.realizer,
        policy,
        guard,
        store,
        backend.clock,
        forecaster=forecaster,
        models=models,
        profiler=backend.profiler,
    )
