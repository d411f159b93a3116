"""The flinktune policy (ours): shapes ranked by measured capacity, in-place scaling, rare re-shaping,
every optional change priced in minutes over the latency target and paid from an error budget.

Use :class:`FlinktunePolicy` (``make_policy("flinktune", space)``). This module holds its options,
the memory it persists between decide runs, the utilization targets, the in-place decisions (scale
up, scale down, keep) and the gate every optional change passes (its predicted catch-up against the
error budget, the saving against that price, no reversal within the hold time); its parts live by
concept in :mod:`flinktune.tuner` (shape decisions, shapes, sizing, capacity, latency, the price of a
change, the error budget). Why each rule is there, and what it fixed in replays: docs/tuner.md.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from flinktune.config_space import ConfigSpace, Configuration
from flinktune.decision import Action, Decision, JobState
from flinktune.decision.guard import scales_up
from flinktune.decision.reconfig import same_shape
from flinktune.decision.stages import PolicyContext
from flinktune.tuner.capacity import CapacityModel, Shape, ShapeCapacities, measured_capacity, shape_from_json, shape_of
from flinktune.tuner.change_cost import ChangeCosts, ModeCost
from flinktune.tuner.change_gate import ChangeGate
from flinktune.tuner.error_budget import ErrorBudget
from flinktune.tuner.latency import LatencyCap, LatencyCurves
from flinktune.tuner.shape_decisions import ShapeDecisions
from flinktune.tuner.shapes import SLOT_CORES
from flinktune.tuner.sizing import ChangeLog, PlanWindow, current_demand, planned_rate, size_in_shape
from flinktune.tuner.trend import RateTrend

__all__ = ["FlinktunePolicy"]


@dataclass
class FlinktunePolicy(ShapeDecisions, ChangeGate):
    """See the module docstring (the shape decisions: :class:`ShapeDecisions`). Rates are rec/s, times seconds."""

    space: ConfigSpace
    confidence: float = 0.95
    quantile: float = 0.9
    catch_up_s: float = 300.0
    utilization: float = 0.75
    down_utilization: float = 0.75
    up_trigger: float = 0.85
    min_down_step: int = 4
    growth: float = 1.6
    range_factors: tuple[float, ...] = (0.5, 0.75, 1.0, 1.3, 1.6)
    slot_cores: tuple[float, ...] | None = SLOT_CORES
    fallback_confidence: float = 0.6
    memory_headroom: float = 0.5
    min_slot_memory_mb: float = 512.0
    down_horizon_s: float = 1800.0
    min_dwell_s: float = 900.0
    profile_margin: float = 1.15
    profile_batch: int = 3
    #: Profiling runs at this multiple of the planned rate: a climbing load is covered by one round
    #: instead of one round per decision of the climb (1.0: at the plan itself).
    profile_ahead: float = 1.0
    shape_saving: float = 0.2
    shape_dwell_s: float = 1800.0
    shape_check: float = 0.5
    reshape_utilization: float = 0.75
    change_budget: int = 4
    budget_window_s: float = 6 * 3600.0
    reshape_on_down: bool = True
    first_shape_waits: int = 1
    latency_margin: float = 0.85
    #: Minutes over the latency target the job may spend per ``budget_window_s`` of error budget (1 % of a day).
    slo_budget_minutes: float = 14.4
    #: Watching time (s) the error budget is credited with at the start; the rest is earned at the
    #: SLO's rate as the job runs. The default credits a whole day at once; four hours (2.4 of the
    #: day's 14.4 min) keep a policy met this morning from spending a day's budget by noon, and meet
    #: the SLO where a day's credit broke it in every scenario of the robustness matrix, but hold a new
    #: job's first shape past its first hour (docs/tuner.md).
    slo_head_start_s: float = 86400.0
    #: Share of the error budget left that one optional change may be predicted to spend.
    budget_spend_share: float = 0.5
    #: What one minute over target is worth, in minutes of the static maximum's cost: an optional
    #: change must save more over ``saving_horizon_s`` than its predicted minutes over target are worth.
    minute_worth: float = 10.0
    saving_horizon_s: float = 7200.0
    #: No scale-down within this long of a scale-up (and no optional scale-up after a scale-down):
    #: reversing a change that soon is flapping. A scale-up the current load needs is never held.
    reversal_hold_s: float = 1800.0
    #: Largest share of the running parallelism one in-place scale-down may free at first (the trust
    #: region); it widens by ``trust_growth`` after each change that cost what was predicted, halves after one that cost more.
    trust_start: float = 0.5
    trust_growth: float = 1.5
    #: (downtime s, warm-up s) per change mode before the job's own changes are seen, e.g. from its
    #: calibrated twin (:func:`flinktune.twin.reconfig_modes.change_priors`); None: cautious defaults.
    change_priors: dict[str, tuple[float, float]] | None = None
    #: (downtime s, warm-up s) of a job failure (detection, restart, restore; then the warm-up), e.g. from
    #: the calibrated twin; the catch-up after each failure is what the utilization target leaves room for.
    failure_prior: tuple[float, float] = (45.0, 20.0)
    #: Share of the error budget the expected failures' catch-up may take (beyond their downtime, which
    #: no configuration saves); the utilization is capped so that it fits. None (the default): no cap.
    #: On the ADS replay the cap cost 0.09 of static's CPU for one minute less over target in 12 h.
    failure_budget_share: float | None = None
    #: How much more to plan for when the budget burns in steady operation (2+ minutes over target in
    #: a window with no failure or change to blame).
    burn_growth: float = 1.25
    #: A scale-up (or the first shape) plans for where a steady climb of the input leads within this
    #: long, or for the highest input of the last day if higher (at most ``growth`` times the plan): one
    #: change instead of several, each of which costs minutes over target. 0 (the default) turns it
    #: off: on the ADS replay a climbing plan kept the first shape waiting for profiling (docs/tuner.md).
    ramp_horizon_s: float = 0.0
    name: str = "flinktune"
    shape: Shape | None = None
    capacities: ShapeCapacities = field(default_factory=ShapeCapacities)
    _plans: PlanWindow = field(default_factory=PlanWindow, repr=False)
    _pending_since: float | None = None
    _changes: ChangeLog = field(default_factory=ChangeLog, repr=False)
    #: The last change decided and not yet seen running: (when, target).
    _proposed: tuple[float, Configuration] | None = field(default=None, repr=False)
    #: Decisions that waited for a first measurement before the first shape (see :meth:`_first_shape`).
    _first_waits: int = field(default=0, repr=False)
    latency: LatencyCurves = field(default_factory=LatencyCurves)
    #: This decision's utilization cap from the running shape's latency (None: the configured ones stand).
    _latency_cap: LatencyCap = field(default=LatencyCap(None, ""), repr=False)
    costs: ChangeCosts = field(default_factory=ChangeCosts)
    #: The same model for job failures (mode ``failure``): what the catch-up after one costs.
    failure_costs: ChangeCosts = field(default_factory=lambda: ChangeCosts(modes={}))
    budget: ErrorBudget = field(default_factory=ErrorBudget)
    trust: float = -1.0
    #: Steady p95 latencies (ms): the latency at rest that the headroom to the target is measured from.
    _rest_p95: list[float] = field(default_factory=list, repr=False)
    #: The last scale-up and scale-down decided (s), for the reversal hold.
    _last_up: float = float("-inf")
    _last_down: float = float("-inf")
    _context_target_ms: float = field(default=0.0, repr=False)
    _watched_prediction: float | None = field(default=None, repr=False)
    #: Which way the last proposed change went ("up", "down" in place, None), counted once it runs.
    _proposed_dir: str | None = field(default=None, repr=False)
    #: The shape before this decision: what a held optional change returns to.
    _shape_before: Shape | None = field(default=None, repr=False)
    #: Job failures seen (s) over the last day, and since when failures have been counted.
    _failures: list[float] = field(default_factory=list, repr=False)
    _watching_since: float | None = field(default=None, repr=False)
    _failure_cap: tuple[float, str] = field(default=(1.0, ""), repr=False)
    #: Input rates seen at decisions: the climb a scale-up plans for.
    trend: RateTrend = field(default_factory=RateTrend)

    def __post_init__(self) -> None:
        self.failure_costs.modes.setdefault("failure", ModeCost(float(self.failure_prior[0]), float(self.failure_prior[1])))
        if self.change_priors:
            for mode, (down, warm) in self.change_priors.items():
                self.costs.modes[mode] = ModeCost(float(down), float(warm))
        self.budget.minutes = self.slo_budget_minutes
        self.budget.head_start_s = self.slo_head_start_s
        self.budget.window_s = 86400.0
        if self.trust < 0:
            self.trust = self.trust_start

    # -- memory (saved beside each decision, restored by the next decide run) -------------------
    def memory(self) -> dict[str, Any]:
        """What the next decision depends on, as JSON: the shape, measured capacities, the rates
        planned over ``down_horizon_s``, a pending re-shape, the changes counted against the budget
        and the last change decided but not yet seen running (:class:`~flinktune.decision.stages.PolicyMemory`)."""
        return {
            "shape": list(self.shape) if self.shape is not None else None,
            "capacities": self.capacities.to_dict(),
            "plans": self._plans.to_list(),
            "pending_since": self._pending_since,
            "changes": self._changes.to_dict(),
            "proposed": [self._proposed[0], self._proposed[1].to_dict()] if self._proposed is not None else None,
            "first_waits": self._first_waits,
            "latency": self.latency.to_dict(),
            "costs": self.costs.to_dict(),
            "failure_costs": self.failure_costs.to_dict(),
            "budget": self.budget.to_dict(),
            "trust": self.trust,
            "rest_p95": list(self._rest_p95),
            "failures": list(self._failures),
            "watching_since": self._watching_since,
            "proposed_dir": self._proposed_dir,
            "watched_prediction": self._watched_prediction,
            "last_up": self._last_up if self._last_up != float("-inf") else None,
            "last_down": self._last_down if self._last_down != float("-inf") else None,
            "rates": self.trend.to_list(),
        }

    def restore_memory(self, memory: dict[str, Any]) -> None:
        """Continue from :meth:`memory` (saved by an earlier decide run); ValueError names a bad entry."""
        try:
            self.shape = shape_from_json(memory["shape"]) if memory.get("shape") is not None else None
            self.capacities.restore(memory.get("capacities", {}))
            self._plans = PlanWindow().restore(memory.get("plans", []))
            self._pending_since = float(memory["pending_since"]) if memory.get("pending_since") is not None else None
            self._changes = ChangeLog().restore(memory.get("changes", {}))
            self._first_waits = int(memory.get("first_waits", 0))
            self.latency = LatencyCurves().restore(memory.get("latency", []))
            self.costs = ChangeCosts().restore(memory.get("costs", {}))
            self.failure_costs.restore(memory.get("failure_costs", {}))
            self.budget.restore(memory.get("budget", {}))
            self.trust = float(memory.get("trust", self.trust_start))
            self._rest_p95 = [float(x) for x in memory.get("rest_p95", [])]
            self._failures = [float(x) for x in memory.get("failures", [])]
            self._proposed_dir = memory.get("proposed_dir")
            wp = memory.get("watched_prediction")
            self._watched_prediction = float(wp) if wp is not None else None
            ws = memory.get("watching_since")
            self._watching_since = float(ws) if ws is not None else None
            self._last_up = float(memory["last_up"]) if memory.get("last_up") is not None else float("-inf")
            self._last_down = float(memory["last_down"]) if memory.get("last_down") is not None else float("-inf")
            self.trend = RateTrend().restore(memory.get("rates", []))
            proposed = memory.get("proposed")
            self._proposed = (
                (float(proposed[0]), Configuration.from_dict(proposed[1], where="flinktune memory 'proposed'"))
                if proposed is not None
                else None
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"flinktune policy memory: cannot restore it ({type(exc).__name__}: {exc})") from None

    @property
    def capacity(self) -> CapacityModel:
        """The capacity model of the current shape (an empty one before a shape is chosen)."""
        return self.capacities.model(self.shape) if self.shape is not None else CapacityModel()

    # -- utilization: the configured targets, capped by the running shape's latency -----------
    @property
    def _util_before_failures(self) -> float:
        """The utilization target before the failure headroom cap: what a shape must carry not to be outgrown."""
        cap = self._latency_cap.utilization
        return self.utilization if cap is None else min(self.utilization, cap)

    @property
    def _util(self) -> float:
        util = min(self._util_before_failures, self._failure_cap[0])
        # Conservative as the error budget runs out: up to 15 % more headroom once less than half is left.
        return util * (1.0 - 0.15 * max(0.0, 0.5 - self.budget.share_left) / 0.5)

    @property
    def _reshape_util(self) -> float:
        return min(self.reshape_utilization, self._util)

    @property
    def _trigger(self) -> float:
        """Scale-up trigger: ``up_trigger`` above ``utilization``, by the same step above a latency cap."""
        return max(self.up_trigger, self.utilization) - self.utilization + self._util

    def _measure_latency(self, state: JobState, capacity: float | None, context: PolicyContext) -> None:
        """Record this window on the running shape (:meth:`LatencyCurves.observe_window`) and set this decision's cap."""
        self.latency.observe_window(state, capacity, self._changes.since_last(state.ts))
        if self.shape is None or self.latency_margin <= 0:
            self._latency_cap = LatencyCap(None, "")
        else:
            self._latency_cap = self.latency.cap(self.shape, context.latency_target_ms, self.latency_margin)

    # -- rates -------------------------------------------------------------------------------
    def planned_rate(self, state: JobState, context: PolicyContext) -> tuple[float, str]:
        """The rate to provision for now: max(forecast quantile peak, input + lag drain) (:func:`planned_rate`)."""
        return planned_rate(state, context, self.quantile, self.catch_up_s)

    def _sustained(self, now: float, planned: float) -> float:
        """Highest rate planned over the last ``down_horizon_s`` (what a scale-down must still carry)."""
        return self._plans.push(now, planned, self.down_horizon_s)

    # -- sizing within the shape ------------------------------------------------------------
    def _size(
        self, shape: Shape, rate: float, context: PolicyContext, utilization: float | None = None
    ) -> tuple[Configuration, str, bool]:
        """(smallest in-shape configuration for ``rate``, why, whether it is enough) (:func:`size_in_shape`)."""
        util = self._util if utilization is None else utilization
        return size_in_shape(self.space, shape, self.capacities, rate, util, context, self.confidence)

    # -- decide ------------------------------------------------------------------------------
    def _climb(self, planned: float, why: str) -> tuple[float, str]:
        """(rate, why) for a scale-up: where a steady climb of the input leads within ``ramp_horizon_s``
        (at most ``growth`` x ``planned``) when that is above ``planned``; else ``planned`` as it is."""
        if self.ramp_horizon_s <= 0:
            return planned, why
        climb = self.trend.ahead(self.ramp_horizon_s)
        seen = self.trend.peak()
        ahead, said = (climb.rate, climb.describe(self.ramp_horizon_s)) if climb is not None else (0.0, "")
        if seen > ahead:
            ahead, said = seen, f"the input reached {seen:,.0f} rec/s within the last day"
        if ahead <= planned:
            return planned, why
        rate = min(ahead, planned * self.growth)
        return rate, f"{why}; {said}: planned {rate:,.0f} rec/s, so one change lasts"

    def decide(self, state: JobState, context: PolicyContext) -> Decision:
        self._confirm_change(state.config)
        self._observe(state, context)
        if state.restarts == 0 and state.running:  # a failure's window shows the outage, not the load
            self.trend.observe(state.ts, state.input_rate)
        decision = self._decide_all(state, context)
        cap, why = self._failure_cap
        note = f"; utilization capped at {cap:.0%} by failures: {why}" if why else ""
        return replace(
            decision,
            reason=f"{decision.reason} [{self.budget.describe()}{note}]",
            inputs=dict(decision.inputs, budget_left_min=self.budget.left(), trust=self.trust),
        )

    def _decide_all(self, state: JobState, context: PolicyContext) -> Decision:
        if context.forecast is None or context.surrogate is None:
            missing = "forecaster" if context.forecast is None else "surrogate"
            return Decision.keep(self.name, f"hold: no champion {missing} model is available yet")
        cur = state.config
        self._shape_before = self.shape
        if self.shape is None and cur.with_(vertex_parallelism={}) != self.space.maximum:
            # A fresh policy object (a new decision task) on a job already tuned: adopt its shape
            # instead of choosing again, which could cost a redeploy for nothing.
            self.shape = shape_of(cur)
        if self.shape is not None and shape_of(cur) != self.shape:  # changed behind our back (rollback)
            self.shape = shape_of(cur)
            self._pending_since = None
        cap = None
        if not cur.vertex_parallelism:
            # Every steady window measures the running shape, the static maximum before the first
            # choice included: that measurement is what the first shape is ranked by.
            cap = measured_capacity(state)
            if cap is not None:
                self.capacities.observe(shape_of(cur), cur.parallelism, cap)
        self._measure_latency(state, cap, context)
        decision = self._decide(state, context)
        limit = self._latency_cap
        if limit.utilization is None or limit.utilization >= self.utilization:
            return decision
        note = f" [utilization capped at {limit.utilization:.0%} (not {self.utilization:.0%}) by latency: {limit.reason}]"
        return replace(decision, reason=decision.reason + note, inputs=dict(decision.inputs, latency_cap=limit.utilization))

    def _decide(self, state: JobState, context: PolicyContext) -> Decision:
        cur = state.config
        planned, why = self.planned_rate(state, context)
        burning = self._burning(state)
        if burning:
            # The budget burns in steady operation: the size that looked enough is not (noisy minutes
            # pass the target while the mean p95 stays under it). Plan for more, and do not wait.
            planned *= self.burn_growth
            why += (
                f"; {burning} min over target in this window with no failure or change to blame: {self.burn_growth - 1:.0%} more"
            )
        sustained = self._sustained(state.ts, planned)
        inputs = {"planned_rate": planned, "sustained_rate": sustained, "rule": why, "failures_in_window": state.restarts}
        if self.shape is None:
            return self._first_shape(state, context, *self._climb(planned, why), inputs)
        need_up, why_up, fits = self._size(self.shape, planned, context)
        if not fits and self._failure_cap[1] and self._size(self.shape, planned, context, self._util_before_failures)[2]:
            # Short of the failure headroom only: the shape's largest size is the best in place; the
            # headroom is no reason for a redeploy, which costs more over target than it would save.
            fits = True
            why_up += "; the shape's largest leaves less than the failure headroom asks for"
        # Outgrown: even the shape's largest parallelism cannot carry the plan. At the largest, it
        # waits ``min_dwell_s`` after the last change (a forecast burst passes) unless what arrives
        # now (input + lag drain) does not fit either. Below it, the in-place step to the largest
        # is tried first, unless what arrives now already outruns the running size: then the step
        # would only be outgrown at the next decision, a shape change later.
        demand = current_demand(state, self.catch_up_s)
        outgrown = not fits
        if outgrown and cur.parallelism == need_up.parallelism:
            if self._changes.since_last(state.ts) < self.min_dwell_s:
                outgrown = not self._size(self.shape, demand, context)[2]
        elif outgrown:
            running = self.capacity.estimate(cur.parallelism)
            outgrown = running is not None and demand > self._util * running
        if outgrown:
            # Outgrown: a bigger shape (a redeploy), ranked by capacity when there is a measured
            # one; the surrogate alone only within what profiling covered (beyond it, it
            # extrapolates, and has proposed tiny shapes for huge rates).
            covered = context.profiled_max_rate
            if self._best_shape(planned, context, need_up) is not None or planned <= covered * self.profile_margin:
                return self._regrow(state, context, planned, why, inputs, needed=True)
            return self._largest_known(state, planned, why, need_up, demand, covered, inputs)
        cur_cap = self.capacity.estimate(cur.parallelism)
        # Hysteresis upwards: a measured size keeps until the plan passes ``up_trigger`` of its
        # capacity, and then grows to ``utilization``, so one step covers more of the climb.
        room = cur_cap is not None and planned <= self._trigger * cur_cap
        if need_up.parallelism > cur.parallelism and not room:
            self._pending_since = None
            # Optional when only the forecast asks for it: what arrives now (input + lag drain) still
            # fits ``utilization`` of the running size, the margin recovery is sized with. Such a
            # scale-up keeps within the change budget; one the current load needs never waits.
            demand = current_demand(state, self.catch_up_s)
            optional = cur_cap is not None and demand <= self._util * cur_cap and not burning
            climbed, why_climb = self._climb(planned, why)
            if climbed > planned:
                bigger, why_bigger, fits_bigger = self._size(self.shape, climbed, context)
                if fits_bigger:
                    need_up, why_up, planned, why = bigger, why_bigger, climbed, why_climb
            budget = self._over_budget(state.ts) if optional else None
            if budget is not None:
                return Decision.keep(
                    self.name,
                    f"hold p{cur.parallelism}: a scale-up to p{need_up.parallelism} for the forecast "
                    f"{planned:,.0f} rec/s waits while the current {demand:,.0f} rec/s fits "
                    f"{self._util:.0%} of its capacity {cur_cap:,.0f} rec/s: {budget}",
                    **inputs,
                )
            return self._change(
                state, need_up, f"scale up in place for {planned:,.0f} rec/s ({why}): {why_up}", inputs, needed=not optional
            )
        # Hysteresis: a scale-down must leave the smaller size at most ``down_utilization`` busy,
        # below the scale-up threshold, so a load hovering at one boundary does not flap.
        need_down, why_down, _ = self._size(self.shape, sustained, context, min(self.down_utilization, self._util))
        # The trust region: one in-place step down frees at most ``trust`` of the running parallelism.
        floor_p = int(np.ceil(cur.parallelism * (1.0 - self.trust)))
        if need_down.parallelism < floor_p:
            steps = [c for c in self._in_shape(self.shape) if c.parallelism >= floor_p]
            if steps:
                need_down = min(steps, key=lambda c: c.parallelism)
                why_down += f"; stepped to p{need_down.parallelism}, the trust region's {self.trust:.0%} of p{cur.parallelism}"
        # A scale-down must free at least ``min_down_step`` parallelism: fewer, larger steps down.
        down = need_down.parallelism <= cur.parallelism - max(self.min_down_step, 1)
        budget = self._over_budget(state.ts)
        if down and budget is not None:
            return Decision.keep(
                self.name, f"hold p{cur.parallelism}: a scale-down to p{need_down.parallelism} waits: {budget}", **inputs
            )
        if down and self._changes.since_last(state.ts) >= self.min_dwell_s:
            reshaped = self._reshape_down(state, context, sustained, need_down, inputs) if self.reshape_on_down else None
            if reshaped is not None:
                return reshaped
            return self._change(
                state,
                need_down,
                f"scale down in place: the highest rate planned over the last "
                f"{self.down_horizon_s / 60:.0f} min is {sustained:,.0f} rec/s; {why_down}",
                inputs,
            )
        reshape = self._reshape(state, context, max(planned, sustained), inputs) if budget is None else None
        if reshape is not None:
            return reshape
        if down:
            return Decision.keep(
                self.name,
                f"hold p{cur.parallelism}: a scale-down to p{need_down.parallelism} waits for the "
                f"{self.min_dwell_s:.0f} s dwell time since the last change",
                **inputs,
            )
        return Decision.keep(
            self.name,
            f"p{cur.parallelism} fits {planned:,.0f} rec/s ({why}) and the sustained {sustained:,.0f} rec/s; keep",
            **inputs,
        )

    def _largest_known(
        self,
        state: JobState,
        planned: float,
        why: str,
        largest: Configuration,
        demand: float,
        covered: float,
        inputs: dict,
    ) -> Decision:
        """Outgrown, and no shape is trusted to carry ``planned`` (nothing measured carries it, and it is
        beyond what profiling covered): the most capacity known now. The shape's ``largest`` in place
        when it carries what arrives now (``demand``), else the space's maximum, the configuration the
        job was met at; keeping an outgrown size waits for minutes over target that no rule ends."""
        cur = state.config
        beyond = f"{planned:,.0f} rec/s ({why}) is beyond what profiling covered ({covered:,.0f} rec/s) to trust another shape"
        top = self.space.maximum
        assert self.shape is not None  # outgrown: a shape was chosen
        in_place = self.capacities.estimate(self.shape, largest.parallelism)
        if largest.parallelism > cur.parallelism and in_place is not None and demand <= self._util * in_place:
            return self._change(
                state,
                largest,
                f"scale up in place to the shape's largest: {beyond}; p{largest.parallelism} carries the current "
                f"{demand:,.0f} rec/s at {demand / in_place:.0%} of its capacity {in_place:,.0f} rec/s",
                inputs,
                needed=True,
            )
        top_cap = self.capacities.estimate(shape_of(top), top.parallelism)
        running = self.capacities.estimate(self.shape, cur.parallelism)
        if cur.with_(vertex_parallelism={}) != top and (top_cap is None or running is None or top_cap > running):
            self.shape = shape_of(top)
            self._pending_since = None
            known = f"capacity {top_cap:,.0f} rec/s measured" if top_cap is not None else "the largest the space allows"
            return self._change(
                state,
                top,
                f"outgrown: {beyond}; back to the maximum ({known}) until profiling covers the load",
                inputs,
                needed=True,
            )
        return Decision.keep(self.name, f"p{cur.parallelism} is the most capacity known; {beyond}: keep", **inputs)

    def _change(self, state: JobState, target: Configuration, reason: str, inputs: dict, *, needed: bool = False) -> Decision:
        """Propose ``target``. An optional change (not ``needed`` by the load that arrives now) is
        made only when its predicted minutes over target fit the error budget and the saving over
        ``saving_horizon_s`` outweighs them; otherwise the job keeps its configuration, with why."""
        price = self._price(state, target, inputs)
        if not needed:
            held = self._hold_optional(state, target, price)
            if held is not None:
                self.shape = self._shape_before
                return Decision.keep(
                    self.name, f"hold {state.config.describe()}: {reason}; but {held}", **inputs, change_price_min=price.over_min
                )
        self._proposed = (state.ts, target)
        mode = "in-place rescale" if same_shape(state.config, target) else "savepoint redeploy"
        if scales_up(state.config, target):
            self._proposed_dir = "up"
        elif same_shape(state.config, target) and target.parallelism < state.config.parallelism:
            self._proposed_dir = "down"  # an in-place step down; a re-shape is not one side of a flap
        else:
            self._proposed_dir = None
        self.costs.started(
            state.ts, price.mode, state.input_rate, state.lag if np.isfinite(state.lag) else 0.0, self._headroom_s(state)
        )
        self._watched_prediction = price.over_s if np.isfinite(price.over_s) else None
        return Decision(
            Action.RECONFIGURE,
            f"{reason}; {target.describe()} by {mode}; predicted price {price.describe()}",
            self.name,
            target=target,
            inputs=dict(
                inputs,
                mode=mode,
                target=target.to_dict(),
                change_price_min=price.over_min,
                settle_s=price.settle_s if np.isfinite(price.settle_s) else None,
            ),
        )
