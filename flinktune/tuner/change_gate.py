"""The gate every optional change of the flinktune policy passes, and what it reads off the job.

Use it through :class:`~flinktune.tuner.flinktune_policy.FlinktunePolicy` (its mixin
:class:`ChangeGate`). Each decision first charges the window's minutes over target to the error
budget, watches the last change's and the last failure's catch-up (refitting their price), and
records the latency at rest; an optional change is then held when it reverses a recent one, when its
predicted minutes over target do not fit the budget, or when its saving is worth less than they are.
Why each rule is there: docs/tuner.md.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from flinktune.config_space import ConfigSpace, Configuration
from flinktune.decision import JobState
from flinktune.decision.guard import scales_up
from flinktune.decision.reconfig import same_shape
from flinktune.decision.stages import PolicyContext
from flinktune.tuner.capacity import ShapeCapacities, shape_of
from flinktune.tuner.change_cost import ChangeCosts, ChangePrice, catch_up_grid
from flinktune.tuner.error_budget import ErrorBudget
from flinktune.tuner.selection import relative_cost
from flinktune.tuner.sizing import ChangeLog

__all__ = ["ChangeGate"]


class ChangeGate:
    """The change-gate half of :class:`~flinktune.tuner.flinktune_policy.FlinktunePolicy` (see the module docstring)."""

    if TYPE_CHECKING:
        # What this reads of the policy: its options and state (FlinktunePolicy's fields).
        space: ConfigSpace
        utilization: float
        min_dwell_s: float
        budget_spend_share: float
        minute_worth: float
        saving_horizon_s: float
        reversal_hold_s: float
        trust_growth: float
        failure_budget_share: float | None
        capacities: ShapeCapacities
        costs: ChangeCosts
        failure_costs: ChangeCosts
        budget: ErrorBudget
        trust: float
        _changes: ChangeLog
        _rest_p95: list[float]
        _last_up: float
        _last_down: float
        _context_target_ms: float
        _watched_prediction: float | None
        _failures: list[float]
        _watching_since: float | None
        _failure_cap: tuple[float, str]
        change_budget: int
        budget_window_s: float
        _proposed: tuple[float, Configuration] | None
        _proposed_dir: str | None

        @property
        def _util(self) -> float: ...

    # -- what the job shows: the error budget, the price of the last change, the latency at rest --
    def _observe(self, state: JobState, context: PolicyContext) -> None:
        target = context.latency_target_ms
        self._context_target_ms = target
        failure_start = state.ts - state.window_s if state.restarts > 0 else None
        if self._watching_since is None:
            self._watching_since = state.ts - state.window_s
        failure_down = self.failure_costs.modes["failure"].downtime_s
        if state.restarts > 0 and (not self._failures or state.ts - self._failures[-1] >= state.window_s):
            self._failures.append(state.ts)
            if self.costs.watching:
                self.costs.abandon()  # a failure's catch-up would be charged to the change
                self._watched_prediction = None
            elif not self.failure_costs.watching:
                over = [t for t, v in state.minute_p95 if v > target]
                self.failure_costs.started(
                    over[0] if over else state.ts - 60.0, "failure", state.input_rate, 0.0, self._headroom_s(state)
                )
        self._failures = [t for t in self._failures if t > state.ts - 86400.0]
        self.budget.observe(
            state.ts,
            state.minute_p95,
            target,
            failure_window_start=failure_start,
            watching=self.costs.watching,
            failure_minutes=int(np.ceil(failure_down / 60.0)),
        )
        cur = state.config
        cap = self.capacities.model(shape_of(cur)).estimate(cur.parallelism) if not cur.vertex_parallelism else None
        if self.failure_costs.watching:
            self.failure_costs.observe(state.ts, state.minute_p95, target, cap)
        if self.costs.watching:
            predicted = self._watched_prediction
            episode = self.costs.observe(state.ts, state.minute_p95, target, cap)
            if episode is not None and predicted is not None:
                # The trust region widens when changes cost what was predicted, narrows when they cost more.
                ok = episode.over_s <= predicted + 60.0
                self.trust = min(1.0, self.trust * self.trust_growth) if ok else max(0.15, self.trust * 0.5)
                self._watched_prediction = None
        steady = (
            state.restarts == 0
            and state.running
            and self._changes.since_last(state.ts) >= self.min_dwell_s
            and state.latency_p95_ms <= target
            and np.isfinite(state.latency_p95_ms)
        )
        if steady:
            self._rest_p95 = [*self._rest_p95, float(state.latency_p95_ms)][-30:]
        self._failure_cap = self._cap_for_failures(state)

    def _cap_for_failures(self, state: JobState) -> tuple[float, str]:
        """The highest utilization whose catch-up after each expected failure fits ``failure_budget_share``
        of the error budget (beyond the failure's own downtime), with why; 1.0 when nothing constrains it.

        Failures per day: those seen over the last day, with one a day (a quarter of one in six hours) as
        the prior for a job just met, so that a job failing often shows it within hours.
        """
        if self.failure_budget_share is None:
            return 1.0, ""
        seen_h = min(max(state.ts - (self._watching_since or state.ts), 0.0), 86400.0) / 3600.0
        per_day = (len(self._failures) + 0.25) / (seen_h + 6.0) * 24.0
        allowed_s = 60.0 * self.failure_budget_share * self.budget.minutes / per_day
        mode = self.failure_costs.modes["failure"]
        down, warm = mode.downtime_s, mode.warmup_s
        grid = np.arange(0.20, 0.951, 0.025)
        over, _ = catch_up_grid(grid, self._headroom_s(state), down, warm)
        fits = grid[over - down <= allowed_s]
        cap = float(fits.max()) if fits.size else float(grid[0])
        if cap >= self.utilization:
            return 1.0, ""
        return cap, (
            f"~{per_day:.0f} failures a day, each followed by a catch-up that must stay within "
            f"{allowed_s:.0f} s over target beyond its {down:.0f} s downtime "
            f"({self.failure_budget_share:.0%} of the error budget)"
        )

    def _burning(self, state: JobState) -> int:
        """Minutes of this window charged to the budget while no failure or change explains them (0: none)."""
        if state.restarts > 0 or self.costs.watching or self.failure_costs.watching:
            return 0
        start = state.ts - state.window_s
        charged = sum(1 for t in self.budget.charged if t >= start)
        return charged if charged >= 2 else 0

    def _headroom_s(self, state: JobState) -> float:
        """Seconds of queueing the latency target leaves above the latency at rest."""
        target = self._context_target_ms
        rest = (
            float(np.median(self._rest_p95))
            if self._rest_p95
            else (state.latency_p95_ms if np.isfinite(state.latency_p95_ms) and state.latency_p95_ms <= target else 0.5 * target)
        )
        return max(target - rest, 0.1 * target) / 1000.0

    def _price(self, state: JobState, target: Configuration, inputs: dict) -> ChangePrice:
        """What ``target`` is predicted to cost in minutes over target (:class:`ChangeCosts`)."""
        mode = "rescale" if same_shape(state.config, target) else "redeploy"
        # Measured, or transferred from the shape measured last by cores per slot (as sizing does).
        cap = self.capacities.estimate(shape_of(target), target.parallelism) if not target.vertex_parallelism else None
        if cap is None:  # nothing measured yet: sized to carry the plan at the utilization target
            cap = float(inputs.get("planned_rate", state.input_rate)) / max(self._util, 0.05)
        rate = state.input_rate if np.isfinite(state.input_rate) else 0.0
        lag = state.lag if np.isfinite(state.lag) else 0.0
        return self.costs.predict(mode, rate, lag, cap, self._headroom_s(state))

    # -- changes: the budget of optional ones, and counting one once it runs ------------------
    def _over_budget(self, now: float) -> str | None:
        """Why an optional change (a scale-down, a shape re-choice to save, a scale-up only the
        forecast asks for) must wait, or None.

        At most ``change_budget`` changes in any ``budget_window_s`` (:class:`ChangeLog`). A
        scale-up the current load needs and an outgrown shape never wait.
        """
        return self._changes.over_budget(now, self.change_budget, self.budget_window_s)

    def _confirm_change(self, running: Configuration) -> None:
        """Count the last decided change against the budget and the dwell time once it runs.

        A change the guard held back (stabilization, quota, a scale-down window) never ran: it
        must not use the budget or reset the dwell time, or the policy would wait for a change
        that did not happen. The decision time is what counts, as if it had been counted then.
        """
        if self._proposed is None:
            return
        at, target = self._proposed
        self._proposed = None
        if running.with_(vertex_parallelism={}) == target.with_(vertex_parallelism={}):
            self._changes.record(at)
            if self._proposed_dir == "up":
                self._last_up = at
            elif self._proposed_dir == "down":
                self._last_down = at
        else:  # held back by the guard: nothing ran, nothing to learn its price from
            self.costs.abandon()
            self._watched_prediction = None

    # -- the gate --------------------------------------------------------------------------
    def _hold_optional(self, state: JobState, target: Configuration, price: ChangePrice) -> str | None:
        """Why an optional change to ``target`` must wait, or None: it reverses a recent change, its
        predicted minutes over target exceed what the error budget lets one change spend, or the
        saving over the horizon does not outweigh them."""
        now = state.ts
        down = relative_cost(target, self.space) < relative_cost(state.config, self.space)
        if down and now - self._last_up < self.reversal_hold_s:
            return (
                f"a scale-up was made {(now - self._last_up) / 60:.0f} min ago; no reversal within "
                f"{self.reversal_hold_s / 60:.0f} min (no flapping)"
            )
        if not down and scales_up(state.config, target) and now - self._last_down < self.reversal_hold_s:
            return (
                f"a scale-down was made {(now - self._last_down) / 60:.0f} min ago and the current load still fits; "
                f"no reversal within {self.reversal_hold_s / 60:.0f} min (no flapping)"
            )
        allowed = self.budget.left() * self.budget_spend_share
        if not np.isfinite(price.over_s) or price.over_min > allowed:
            return (
                f"it would cost {price.describe()}, more than the {allowed:.1f} min an optional change may spend now "
                f"({self.budget.describe()})"
            )
        if down:
            saving = relative_cost(state.config, self.space) - relative_cost(target, self.space)
            worth = saving / 2.0 * self.saving_horizon_s / 60.0  # static-maximum minutes saved (static max costs 2.0)
            if worth < self.minute_worth * price.over_min:
                return (
                    f"it saves {worth:.1f} static-minutes over {self.saving_horizon_s / 3600:g} h, less than its predicted "
                    f"{price.over_min:.1f} min over target are worth ({self.minute_worth:g} static-minutes each); {price.describe()}"
                )
        return None
