"""The flinktune policy's shape decisions: the first shape, a bigger one when outgrown, a cheaper one to save.

Use :class:`ShapeDecisions` only as the base of :class:`~flinktune.tuner.flinktune_policy.FlinktunePolicy`:
it holds no state of its own and reads the policy's options and state (declared in its body for the
type checker). Everything that picks or changes the *shape* (slots, CPU, memory, checkpoint interval:
a savepoint redeploy) is here; moving the parallelism within the shape (an in-place rescale) is the
policy's ``decide``. To rank or choose shapes outside the policy, call
:mod:`flinktune.tuner.shape_choice` directly.

- **the first shape** (:meth:`~ShapeDecisions._first_shape`): profile first when the planned rate is
  beyond what profiling covered (``profile_margin``); wait up to ``first_shape_waits`` decisions
  while the running job shows no capacity (a failure, a stopped job); then choose.
- **choosing** (:meth:`~ShapeDecisions._regrow`), first or when outgrown: by measured capacity
  (:meth:`~ShapeDecisions.rank_shapes`, the surrogate a relative check) once any shape has been
  measured; before that by the surrogate alone, the shape cheapest over a range of rates
  (:meth:`~ShapeDecisions._surrogate_shape`).
- **re-shaping to save** (:meth:`~ShapeDecisions._reshape`, :meth:`~ShapeDecisions._reshape_down`):
  another shape must carry the load ``shape_saving`` cheaper, grow in place, and hold that verdict
  for ``shape_dwell_s``, or land a due scale-down in one redeploy.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from flinktune.config_space import ConfigSpace, Configuration
from flinktune.decision import Action, Decision, JobState
from flinktune.decision.stages import PolicyContext
from flinktune.tuner.capacity import Shape, ShapeCapacities, shape_of
from flinktune.tuner.profiling import propose_profiling
from flinktune.tuner.selection import CandidateScores, relative_cost, score_candidates
from flinktune.tuner.shape_choice import choose_shape, rank_shapes, roomy
from flinktune.tuner.shapes import SizedShape, shape_candidates, shape_configs
from flinktune.tuner.sizing import ChangeLog

__all__ = ["ShapeDecisions"]


class ShapeDecisions:
    """The shape half of :class:`~flinktune.tuner.flinktune_policy.FlinktunePolicy` (see the module docstring)."""

    if TYPE_CHECKING:
        # What this reads of the policy: its options and state (FlinktunePolicy's fields) ...
        space: ConfigSpace
        name: str
        confidence: float
        fallback_confidence: float
        growth: float
        range_factors: tuple[float, ...]
        slot_cores: tuple[float, ...] | None
        memory_headroom: float
        min_slot_memory_mb: float
        down_horizon_s: float
        min_dwell_s: float
        profile_margin: float
        profile_batch: int
        profile_ahead: float
        shape_saving: float
        shape_dwell_s: float
        shape_check: float
        first_shape_waits: int
        shape: Shape | None
        capacities: ShapeCapacities
        _pending_since: float | None
        _changes: ChangeLog
        _first_waits: int

        # ... and the parts of it that size within a shape and decide a change.
        @property
        def _util(self) -> float: ...

        @property
        def _reshape_util(self) -> float: ...

        def _size(
            self, shape: Shape, rate: float, context: PolicyContext, utilization: float | None = None
        ) -> tuple[Configuration, str, bool]: ...

        def _change(
            self, state: JobState, target: Configuration, reason: str, inputs: dict, *, needed: bool = False
        ) -> Decision: ...

    # -- ranking shapes with the policy's options ----------------------------------------------
    def _in_shape(self, shape: Shape) -> list[Configuration]:
        """The in-place parallelism steps of ``shape`` (:func:`shape_configs`)."""
        return shape_configs(self.space, shape)

    def _roomy(self, surrogate, scores: CandidateScores) -> np.ndarray:
        """Candidates whose predicted heap use stays under ``memory_headroom`` of what they reserve (:func:`roomy`)."""
        return roomy(surrogate, self.space, scores, self.memory_headroom, self.min_slot_memory_mb)

    def choose_shape(
        self,
        by_rate: list[CandidateScores],
        grown: CandidateScores,
        roomy: np.ndarray | None = None,
        confidence: float | None = None,
    ) -> int | None:
        """Index (into ``by_rate[0]``) of the candidate whose shape is cheapest over a range of rates
        (:func:`~flinktune.tuner.shape_choice.choose_shape`); ``confidence`` defaults to the policy's."""
        return choose_shape(by_rate, grown, self.confidence if confidence is None else confidence, roomy)

    def _candidates(self) -> list[Configuration]:
        """:func:`shape_candidates` of the space, or every candidate when those rules leave none.

        The rules (cores and memory per slot) are preferences for a rich space; a small space, such
        as a one-machine cluster with 1 GB TaskManagers, may have nothing else to offer.
        """
        return shape_candidates(self.space, self.slot_cores, self.min_slot_memory_mb) or self.space.candidates()

    def _shapes(self) -> list[Shape]:
        """The shapes the policy may choose (from :meth:`_candidates`), in a fixed order."""
        return sorted({shape_of(c) for c in self._candidates()})

    def rank_shapes(
        self, rate: float, context: PolicyContext, reference: Configuration | None = None, utilization: float | None = None
    ) -> list[SizedShape]:
        """Every shape with a capacity estimate, sized for ``rate`` at ``utilization`` (default the
        policy's), cheapest first: :func:`~flinktune.tuner.shape_choice.rank_shapes`. Use it to
        pick or re-pick the shape; ``reference`` is the running shape sized for the same rate."""
        util = self._util if utilization is None else utilization
        return rank_shapes(
            self.space,
            self._shapes(),
            self.capacities,
            rate,
            context,
            utilization=util,
            growth=self.growth,
            grow_utilization=self._util,
            shape_check=self.shape_check,
            reference=reference,
        )

    def _best_shape(
        self, rate: float, context: PolicyContext, reference: Configuration | None = None, utilization: float | None = None
    ) -> SizedShape | None:
        """The cheapest of :meth:`rank_shapes` that grows in place (the cheapest when none does), or None."""
        ranked = self.rank_shapes(rate, context, reference, utilization)
        growing = [o for o in ranked if o.grows]
        best = growing or ranked
        return best[0] if best else None

    # -- the first shape, and a bigger one when the current one is outgrown -------------------
    def _first_shape(self, state: JobState, context: PolicyContext, planned: float, why: str, inputs: dict) -> Decision:
        covered = context.profiled_max_rate
        if planned > covered * self.profile_margin:
            # Profile ahead of the plan: a load still climbing would otherwise ask for a round at
            # every decision of the climb, each a batch of runs paid for.
            at = planned * max(self.profile_ahead, 1.0)
            configs = propose_profiling(context.surrogate, self.space, at, context, self.profile_batch, state.config)  # type: ignore[arg-type]  # surrogate checked not None at the top of decide()
            ahead = (
                f" {at:,.0f} rec/s ({self.profile_ahead:g}x the plan, so one round covers a climb)"
                if at > planned
                else " that rate"
            )
            return Decision(
                Action.PROFILE,
                f"planned rate {planned:,.0f} rec/s ({why}) is beyond what profiling covered (up to {covered:,.0f} rec/s): "
                f"profile {len(configs)} configurations at{ahead} first",
                self.name,
                profile_configs=tuple(configs),
                inputs=dict(inputs, profile_rate=at),
            )
        failed = state.restarts > 0 or not state.running
        if failed and self.capacities.last is None and self._first_waits < self.first_shape_waits:
            # The first shape is ranked by the capacity the running job shows; a window with a
            # failure (or not running) measures none, and the surrogate alone chose shapes that
            # could not grow in place to the next climb. Waiting one interval costs little.
            self._first_waits += 1
            seen = f"{state.restarts} failure(s)" if state.restarts else "a stopped job"
            return Decision.keep(
                self.name,
                f"wait to choose the first shape: shapes are ranked by the capacity the running job shows, and this window "
                f"held {seen}, so none was measured; the choice comes at the next decision",
                **inputs,
            )
        return self._regrow(state, context, planned, why, inputs)

    def _regrow(
        self, state: JobState, context: PolicyContext, planned: float, why: str, inputs: dict, *, needed: bool = False
    ) -> Decision:
        """Pick the shape (first time, or when the current one cannot carry the load).

        By capacity (:meth:`rank_shapes`) once any shape has been measured; before that by the
        surrogate alone (:meth:`_surrogate_shape`).
        """
        best = self._best_shape(planned, context, state.config.with_(vertex_parallelism={}))
        if best is None:
            return self._surrogate_shape(state, context, planned, why, inputs, needed=needed)
        self.shape = best.shape
        self._pending_since = None
        if best.config == state.config:
            return Decision.keep(self.name, f"shape chosen: the current {best.describe()}", **inputs)
        grow = (
            f"grows in place to {self.growth:g}x that rate"
            if best.grows
            else f"the largest capacity (none grows to {self.growth:g}x that rate in place)"
        )
        return self._change(
            state,
            best.config,
            f"choose the shape for {planned:,.0f} rec/s ({why}): the cheapest at "
            f"utilization {self._util:.0%} that {grow}: {best.describe()}",
            inputs,
            needed=needed,
        )

    def _surrogate_shape(
        self, state: JobState, context: PolicyContext, planned: float, why: str, inputs: dict, *, needed: bool = False
    ) -> Decision:
        """The shape from the surrogate alone (no capacity measured yet): cheapest over a range of rates."""
        args = (context.surrogate, self.space)
        goals = (context.latency_target_ms, context.recovery_limit_s, self._candidates())
        factors = [1.0] + [f for f in self.range_factors if f != 1.0]
        by_rate = [score_candidates(*args, planned * f, *goals) for f in factors]  # type: ignore[arg-type]  # surrogate checked not None at the top of decide()
        scores = by_rate[0]
        grown = score_candidates(*args, planned * self.growth, *goals)  # type: ignore[arg-type]  # surrogate checked not None at the top of decide()
        roomy = self._roomy(context.surrogate, scores)
        best = self.choose_shape(by_rate, grown, roomy)
        if best is None and self.shape is None:
            # Nothing is trusted at the confidence level (few profiling runs, a rate at their edge):
            # settle for a likely one; measured capacity and the guard's rollback correct it.
            best = self.choose_shape(by_rate, grown, roomy, confidence=self.fallback_confidence)
        if best is None:
            if self.shape is not None:  # keep the largest in-place parallelism rather than guess
                return Decision.keep(
                    self.name, f"no other shape is predicted to carry {planned:,.0f} rec/s ({why}); keep", **inputs
                )
            target, note = self.space.maximum, "no configuration is predicted to meet the goals: the maximum"
        else:
            target, note = scores.candidates[best], scores.summary(best)
        self.shape = shape_of(target)
        if target == state.config:
            return Decision.keep(self.name, f"shape chosen: the current {target.describe()} ({note})", **inputs)
        return self._change(
            state,
            target,
            f"choose the shape for {planned:,.0f} rec/s ({why}): the shape cheapest over {min(factors):g}-{max(factors):g}x "
            f"that rate with P(goals) >= {self.confidence} that grows in place to {self.growth:g}x it ({note})",
            inputs,
            needed=needed,
        )

    # -- re-shaping to save -------------------------------------------------------------------
    def _reshape(self, state: JobState, context: PolicyContext, regime: float, inputs: dict) -> Decision | None:
        """Re-choose the shape when another one has carried the load more cheaply for long enough.

        ``regime`` is the larger of the planned rate and the highest rate planned over the last
        ``down_horizon_s``. A shape change is a savepoint redeploy (tens of seconds down), so it
        needs (hysteresis) a saving of at least ``shape_saving`` of the current shape's cost at
        that rate, a shape that can grow in place to ``growth`` x it, and the same verdict at every
        decision for ``shape_dwell_s`` (a shorter dip or burst resets it), and ``min_dwell_s``
        since the last change. None when nothing is to be said (no change pending).
        """
        assert self.shape is not None
        # Both sides sized alike, to ``reshape_utilization``: sizing the new shape up to the
        # scale-up trigger (0.85) made it scale up right after the redeploy in replays.
        now_cfg, _, now_fits = self._size(self.shape, regime, context, self._reshape_util)
        best = self._best_shape(regime, context, now_cfg, self._reshape_util)
        now_cost = relative_cost(now_cfg, self.space) if now_fits else float("inf")
        if best is None or best.shape == self.shape or not best.grows or best.cost > (1.0 - self.shape_saving) * now_cost:
            self._pending_since = None
            return None
        saving = 1.0 - best.cost / now_cost if np.isfinite(now_cost) else 1.0
        if self._pending_since is None:
            self._pending_since = state.ts
        held = state.ts - self._pending_since
        if held < self.shape_dwell_s or self._changes.since_last(state.ts) < self.min_dwell_s:
            return Decision.keep(
                self.name,
                f"keep {state.config.describe()}: for the {regime:,.0f} rec/s of the last "
                f"{self.down_horizon_s / 60:.0f} min shape {best.describe()} would save {saving:.0%} "
                f"(vs {now_cfg.describe()}, cost {now_cost:.2f}); re-choose the shape once that has held "
                f"{self.shape_dwell_s / 60:.0f} min (held {held / 60:.0f} min)",
                **inputs,
            )
        self._pending_since = None
        self.shape = best.shape
        return self._change(
            state,
            best.config,
            f"re-choose the shape: for {held / 60:.0f} min the load (now {regime:,.0f} rec/s, "
            f"the highest planned over the last {self.down_horizon_s / 60:.0f} min) has been carried "
            f"{saving:.0%} cheaper by {best.describe()} than by {now_cfg.describe()} (cost {now_cost:.2f})",
            dict(inputs, shape_saving=saving),
        )

    def _reshape_down(
        self, state: JobState, context: PolicyContext, sustained: float, need_down: Configuration, inputs: dict
    ) -> Decision | None:
        """A due scale-down that lands on a cheaper shape instead, or None.

        The scale-down already rests on what the re-shape rule waits ``shape_dwell_s`` for: the
        load has stayed at or below ``sustained`` for ``down_horizon_s``. So when another shape,
        sized alike (``reshape_utilization``) and able to grow in place, carries that rate at least
        ``shape_saving`` cheaper than the in-place step down would, one redeploy does both: one
        change against the budget instead of a scale-down now and a re-shape later.
        """
        best = self._best_shape(sustained, context, need_down, self._reshape_util)
        down_cost = relative_cost(need_down, self.space)
        if best is None or best.shape == self.shape or not best.grows or best.cost > (1.0 - self.shape_saving) * down_cost:
            return None
        self._pending_since = None
        self.shape = best.shape
        saving = 1.0 - best.cost / down_cost
        return self._change(
            state,
            best.config,
            f"scale down onto a cheaper shape: the highest rate planned over the last "
            f"{self.down_horizon_s / 60:.0f} min is {sustained:,.0f} rec/s, which {best.describe()} carries "
            f"{saving:.0%} cheaper than {need_down.describe()} (cost {down_cost:.2f}), the in-place step down",
            dict(inputs, shape_saving=saving),
        )
