"""The guard: the safety review between a policy's plan and the realizer.

Rules, in order (the first that applies wins, and its reason says so):

1. hold on an unfit state: stale, missing or non-finite metrics, or a job that is not running;
2. roll back: the last change was followed by missed service goals (latency p95 over target or
   lag growing) within ``rollback_window_s`` while the configuration before it met them, in
   steady operation: a miss within ``failure_grace_s`` of a job failure (``numRestarts`` rose)
   is the failure's catch-up, not the change's fault, and never triggers a rollback;
3. bounds and quotas: a target outside the configuration space or over the CPU / memory quota
   is refused;
4. stabilization: no change within ``stabilization_s`` of the previous one (metrics after a
   restart are not yet trustworthy; Flink's own meters are ~60 s moving averages), or within
   ``climb_stabilization_s`` when both are scale-ups (a load still climbing); an attempted
   change whose outcome is unknown (written ahead and never settled, failed, rolled back) or a
   difference reconciliation found counts as a change: it may have restarted the job;
5. at most one scale-down per ``scale_down_window_s``; scale-ups are never delayed by it;
6. skew hold: a scale-up planned against a hot key (the window's analysis says more parallelism
   cannot remove the skew) is held: prefer no change. A rollback (rule 2) is never held by it:
   returning to a configuration that met the goals is not a bet on parallelism.

The guard has the last word: nothing after it changes what it decided (the analysis only quotes).
It remembers recent changes and the last failure; rebuild it from the state store with
:meth:`SafetyGuard.restore` so that cooldowns and the failure grace survive restarts of the
decision task (each run of the decide job is a new process).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

import pandas as pd

from flinktune.config_space import ConfigSpace, Configuration
from flinktune.decision import Action, Decision, JobState

__all__ = ["GuardRules", "SafetyGuard", "is_scale_down", "scales_up"]


@dataclass(frozen=True)
class GuardRules:
    """Thresholds of the guard (seconds, cores, MB)."""

    stabilization_s: float = 300.0
    climb_stabilization_s: float = 180.0
    scale_down_window_s: float = 1800.0
    rollback_window_s: float = 900.0
    quota_cpu: float | None = None
    quota_memory_mb: float | None = None
    lag_growth_tolerance: float = 50.0  # records/s of lag growth still considered "keeping up"
    failure_grace_s: float = 600.0  # after a failure, missed goals are its catch-up (no rollback)


def is_scale_down(current: Configuration, target: Configuration) -> bool:
    """True when the target reserves less CPU or memory, or runs fewer subtasks, than the current one."""
    return (
        target.total_cpu < current.total_cpu
        or target.total_memory_mb < current.total_memory_mb
        or target.parallelism < current.parallelism
    )


def scales_up(current: Configuration, target: Configuration) -> bool:
    """True when ``target`` runs more subtasks than ``current`` (job parallelism or any vertex override)."""
    more_vertex = any(p > current.vertex_overrides().get(v, current.parallelism) for v, p in target.vertex_overrides().items())
    return target.parallelism > current.parallelism or more_vertex


@dataclass
class _Change:
    ts: float
    before: Configuration
    after: Configuration
    scale_down: bool
    goals_met_before: bool
    #: How long the policy predicted the job needs after this change to be back under target (catch-up).
    settle_s: float = 0.0


@dataclass
class SafetyGuard:
    """Stateful guard for one job. ``space`` bounds targets; goals decide rollbacks."""

    space: ConfigSpace
    latency_target_ms: float
    rules: GuardRules = field(default_factory=GuardRules)
    changes: list[_Change] = field(default_factory=list)
    last_failure_ts: float | None = None

    def goals_met(self, state: JobState) -> bool:
        return state.latency_p95_ms <= self.latency_target_ms and state.lag_growth <= self.rules.lag_growth_tolerance

    def after_failure(self, now: float) -> bool:
        """True within ``failure_grace_s`` of the last failure seen (the job is catching up)."""
        return self.last_failure_ts is not None and now - self.last_failure_ts <= self.rules.failure_grace_s

    def review(self, decision: Decision, state: JobState, now: float) -> Decision:
        inputs = dict(decision.inputs, proposed=decision.action.value, proposed_reason=decision.reason)
        if state.problems:
            return Decision.keep(
                "guard", f"hold: {'; '.join(state.problems)}; no change until the data is fit to act on", **inputs
            )

        if state.restarts > 0:
            self.last_failure_ts = now
        last = self.changes[-1] if self.changes else None
        # A change's predicted catch-up (a slow redeploy's warm-up and backlog) is not a miss: the
        # rollback judges it after that, as it judges a failure's catch-up after the grace.
        settle = max(self.rules.stabilization_s, last.settle_s) if last else 0.0
        if (
            last
            and now - last.ts <= self.rules.rollback_window_s + settle - self.rules.stabilization_s
            and last.goals_met_before
            and not self.goals_met(state)
            and state.config == last.after
            and now - last.ts >= settle
            and not self.after_failure(now)
        ):
            return Decision(
                Action.RECONFIGURE,
                f"rollback: after the change at t={last.ts:.0f} to {last.after.describe()} the job missed its goals "
                f"(p95 {state.latency_p95_ms:.0f} ms vs target {self.latency_target_ms:.0f} ms, lag growth "
                f"{state.lag_growth:.0f} rec/s); returning to {last.before.describe()}, which met them",
                "guard",
                target=last.before,
                inputs=dict(inputs, rollback_of=last.after.to_dict()),
            )

        if decision.action is not Action.RECONFIGURE or decision.target is None:
            return decision
        target = decision.target
        if target == state.config:
            return Decision.keep(decision.policy, f"{decision.reason} (already in force: nothing to do)", **decision.inputs)
        base = target.with_(vertex_parallelism={})
        if not self.space.contains(base):
            return Decision.keep(
                "guard",
                f"refused: {target.describe()} is outside the configuration space; keeping the current configuration",
                **inputs,
            )
        if self.rules.quota_cpu is not None and target.total_cpu > self.rules.quota_cpu:
            return Decision.keep(
                "guard",
                f"refused: {target.describe()} needs {target.total_cpu:g} cores, over the quota of {self.rules.quota_cpu:g}",
                **inputs,
            )
        if self.rules.quota_memory_mb is not None and target.total_memory_mb > self.rules.quota_memory_mb:
            return Decision.keep(
                "guard",
                f"refused: {target.describe()} needs {target.total_memory_mb} MB, over the quota of {self.rules.quota_memory_mb:g} MB",
                **inputs,
            )
        # A scale-up after a scale-up (the load still climbing) waits less: the metrics it reads are
        # ~60 s averages taken after the restart, and a climb outruns a 5-minute hold.
        climbing = last is not None and scales_up(last.before, last.after) and scales_up(state.config, target)
        settle = self.rules.climb_stabilization_s if climbing else self.rules.stabilization_s
        if last and now - last.ts < settle:
            wait = settle - (now - last.ts)
            return Decision.keep(
                "guard",
                f"stabilizing: the last change was {now - last.ts:.0f} s ago; wait {wait:.0f} s more before {decision.reason}",
                **inputs,
            )
        down = is_scale_down(state.config, target)
        if down:
            recent = [c for c in self.changes if c.scale_down and now - c.ts < self.rules.scale_down_window_s]
            if recent:
                return Decision.keep(
                    "guard",
                    f"scale-down deferred: one already happened {now - recent[-1].ts:.0f} s ago (at most one per "
                    f"{self.rules.scale_down_window_s:.0f} s); proposed was: {decision.reason}",
                    **inputs,
                )
        return self._skew_hold(decision, state, inputs)

    def _skew_hold(self, decision: Decision, state: JobState, inputs: dict) -> Decision:
        """Rule 6: hold a planned scale-up when the bottleneck is a hot key (more subtasks do not remove skew)."""
        a = state.analysis
        target = decision.target
        if a is None or not a.prefers_no_change or target is None or not scales_up(state.config, target):
            return decision
        return Decision.keep(
            decision.policy,
            f"held {decision.action.value} to {target.describe()}: scaling does not help ({a.scaling_why})",
            **inputs,
            held_target=target.to_dict(),
        )

    def record(self, now: float, state: JobState, applied: Configuration, settle_s: float = 0.0) -> None:
        """Remember a change that was carried out (call after the realizer succeeded); ``settle_s``:
        the catch-up the policy predicted for it, during which a miss does not call for a rollback."""
        if applied != state.config:
            self.changes.append(
                _Change(now, state.config, applied, is_scale_down(state.config, applied), self.goals_met(state), settle_s)
            )
            self.changes = self.changes[-50:]

    def record_attempt(self, now: float, state: JobState, target: Configuration) -> None:
        """Remember a change that was attempted but not confirmed (it failed, ran out of budget or was
        rolled back): it may have restarted the job, so it starts the stabilization window, and it
        never triggers a rollback (nothing says the goals were met before it)."""
        self.changes.append(_Change(now, state.config, target, is_scale_down(state.config, target), False))
        self.changes = self.changes[-50:]

    def restore(self, decisions: pd.DataFrame) -> SafetyGuard:
        """Rebuild the change memory and the last failure from stored decisions (columns of
        ``store.DECISION_COLUMNS``, oldest first), as :meth:`review` and :meth:`record` left them."""
        for row in decisions.itertuples(index=False):
            state = json.loads(row.state)
            if int(state.get("restarts", 0)) > 0 and not state.get("problems"):
                self.last_failure_ts = float(row.ts)
            status = getattr(row, "status", None) or ("applied" if int(row.changed) else "recorded")
            attempted = status in ("intended", "failed", "rolled-back", "reconciled")
            if not row.target or not (int(row.changed) or attempted):
                continue
            before = Configuration.from_dict(state["config"], where=f"decision {row.id}")
            after = Configuration.from_dict(json.loads(row.target), where=f"decision {row.id}")
            met = state["latency_p95_ms"] <= self.latency_target_ms and state["lag_growth"] <= self.rules.lag_growth_tolerance
            # An attempt that was not confirmed starts the stabilization window but never a rollback.
            inputs = json.loads(row.inputs) if getattr(row, "inputs", None) else {}
            settle = float(inputs.get("settle_s") or 0.0) if isinstance(inputs, dict) else 0.0
            self.changes.append(
                _Change(float(row.ts), before, after, is_scale_down(before, after), bool(met) and not attempted, settle)
            )
        return self
