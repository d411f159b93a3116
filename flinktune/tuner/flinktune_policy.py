"""The flinktune policy (ours): shapes ranked by measured capacity, in-place scaling, rare re-shaping.

Use :class:`FlinktunePolicy` (``make_policy("flinktune", space)``). This module holds its options,
the memory it persists between decide runs, the utilization targets and the in-place decisions
(scale up, scale down, keep); its parts live by concept: the decisions that pick or change the
shape (the first one, a bigger one when outgrown, a cheaper one to save) in
:mod:`flinktune.tuner.shape_decisions`, the shapes and the start-up profiling design in
:mod:`flinktune.tuner.shapes`, ranking and choosing shapes in :mod:`flinktune.tuner.shape_choice`,
sizing within a shape and the hysteresis (plan window, change budget) in
:mod:`flinktune.tuner.sizing`, measured capacity in :mod:`flinktune.tuner.capacity`.

Why this shape of policy (each point fixes something seen in replays of Demeter-style choice):

- **a shape, parallelism moves in place.** A change of slots, CPU, memory or checkpoint interval
  is a savepoint redeploy (tens of seconds down, then catch-up); a parallelism-only change is an
  in-place rescale (seconds). So the policy picks a *shape* (slots, CPU, memory, checkpoint
  interval) and then mostly moves the parallelism; the shape changes only when the current one
  cannot carry the load (outgrown) or another has carried it clearly cheaper for a while.
- **shapes for cost granularity.** Shapes give each slot 0.5, 0.75 or 1 core (:data:`~flinktune.tuner.shapes.SLOT_CORES`,
  :func:`~flinktune.tuner.shapes.shape_candidates`) and at least ``min_slot_memory_mb`` after the TaskManager's fixed
  overhead. A slot's threads fully use a fraction of a core, so fractional shapes lower the floor
  at low load (p8 x 0.5 core = 4 cores, not 8) and make the steps finer; whole cores per slot are
  the cheapest at high load (lower parallelism, less shuffle and coordination per record).
- **measured capacity, transferred across shapes.** Within a shape the parallelism is sized from
  the capacity the job shows (DS2's true processing rates, :class:`ShapeCapacities`):
  ``planned <= utilization x capacity``. A shape not yet run is estimated from the shape measured
  last, scaled by cores per slot (up to one core); the static maximum's first window seeds it, so
  the first shape is ranked by measurement, not by a surrogate trained on a dozen runs. The
  surrogate is a relative check (:meth:`FlinktunePolicy.rank_shapes`) and the prior before any
  measurement. Utilization below 1 leaves the spare capacity that catches up after a failure
  (recovery is about downtime x rate / spare) and keeps queueing latency low.
- **the latency target caps utilization.** Capacity says whether a size keeps up, not how slow it
  is meanwhile: every steady window also records the shape's p95 latency at its utilization, and
  once a shape has shown latency rising with load (:class:`~flinktune.tuner.latency.LatencyCurves`)
  every utilization target above is capped where the fitted p95 reaches ``latency_margin`` of the
  job's target; the decision's reason then ends with the cap and its fit.
- **scale up early, scale down late, re-shape rarely.** Scale-ups plan for an upper quantile of
  the forecast peak (and the backlog drain) once the plan passes ``up_trigger`` of the measured
  capacity, and then size to ``utilization``; scale-downs plan for the highest rate planned over
  the last ``down_horizon_s``, size to ``down_utilization``, wait ``min_dwell_s`` since the last
  change and must free ``min_down_step`` parallelism. A shape re-choice to save needs a saving of
  ``shape_saving`` held for ``shape_dwell_s`` (a short dip resets it). Optional changes
  (scale-downs, re-shaping to save, and scale-ups that only the forecast asks for while the
  current input plus lag drain still fits ``utilization`` of the running size) keep within
  ``change_budget`` per ``budget_window_s``; a scale-up the current load needs and an outgrown
  shape never wait. An outgrown shape (at its largest, the plan does not fit) is re-chosen once
  ``min_dwell_s`` has passed since the last change, or at once when the current input plus lag
  drain does not fit it either (a forecast burst passes; a load that already arrived does not).
  Failures (``numRestarts`` rose) are not read as missing capacity.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from flinktune.config_space import ConfigSpace, Configuration
from flinktune.decision import Action, Decision, JobState
from flinktune.decision.reconfig import same_shape
from flinktune.decision.stages import PolicyContext
from flinktune.tuner.capacity import CapacityModel, Shape, ShapeCapacities, measured_capacity, shape_from_json, shape_of
from flinktune.tuner.latency import LatencyCap, LatencyCurves
from flinktune.tuner.shape_decisions import ShapeDecisions
from flinktune.tuner.shapes import SLOT_CORES
from flinktune.tuner.sizing import ChangeLog, PlanWindow, current_demand, planned_rate, size_in_shape

__all__ = ["FlinktunePolicy"]


@dataclass
class FlinktunePolicy(ShapeDecisions):
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
    shape_saving: float = 0.2
    shape_dwell_s: float = 1800.0
    shape_check: float = 0.5
    reshape_utilization: float = 0.75
    change_budget: int = 4
    budget_window_s: float = 6 * 3600.0
    reshape_on_down: bool = True
    first_shape_waits: int = 1
    latency_margin: float = 0.85
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
    def _util(self) -> float:
        cap = self._latency_cap.utilization
        return self.utilization if cap is None else min(self.utilization, cap)

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
    def decide(self, state: JobState, context: PolicyContext) -> Decision:
        if context.forecast is None or context.surrogate is None:
            missing = "forecaster" if context.forecast is None else "surrogate"
            return Decision.keep(self.name, f"hold: no champion {missing} model is available yet")
        cur = state.config
        self._confirm_change(cur)
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
        sustained = self._sustained(state.ts, planned)
        inputs = {"planned_rate": planned, "sustained_rate": sustained, "rule": why, "failures_in_window": state.restarts}
        if self.shape is None:
            return self._first_shape(state, context, planned, why, inputs)
        need_up, why_up, fits = self._size(self.shape, planned, context)
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
            covered = float(context.extras.get("profiled_max_rate", 0.0))
            if self._best_shape(planned, context, need_up) is not None or planned <= covered * self.profile_margin:
                return self._regrow(state, context, planned, why, inputs)
            return Decision.keep(
                self.name,
                f"p{cur.parallelism} is the shape's largest; {planned:,.0f} rec/s ({why}) is beyond "
                f"what profiling covered ({covered:,.0f} rec/s) to trust another shape: keep",
                **inputs,
            )
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
            optional = cur_cap is not None and demand <= self._util * cur_cap
            budget = self._over_budget(state.ts) if optional else None
            if budget is not None:
                return Decision.keep(
                    self.name,
                    f"hold p{cur.parallelism}: a scale-up to p{need_up.parallelism} for the forecast "
                    f"{planned:,.0f} rec/s waits while the current {demand:,.0f} rec/s fits "
                    f"{self._util:.0%} of its capacity {cur_cap:,.0f} rec/s: {budget}",
                    **inputs,
                )
            return self._change(state, need_up, f"scale up in place for {planned:,.0f} rec/s ({why}): {why_up}", inputs)
        # Hysteresis: a scale-down must leave the smaller size at most ``down_utilization`` busy,
        # below the scale-up threshold, so a load hovering at one boundary does not flap.
        need_down, why_down, _ = self._size(self.shape, sustained, context, min(self.down_utilization, self._util))
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

    def _change(self, state: JobState, target: Configuration, reason: str, inputs: dict) -> Decision:
        self._proposed = (state.ts, target)
        mode = "in-place rescale" if same_shape(state.config, target) else "savepoint redeploy"
        return Decision(
            Action.RECONFIGURE,
            f"{reason}; {target.describe()} by {mode}",
            self.name,
            target=target,
            inputs=dict(inputs, mode=mode, target=target.to_dict()),
        )
