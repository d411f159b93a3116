"""The flinktune policy (ours): choose a shape once from the models, then scale in place.

Why this shape of policy (each point fixes something seen in replays of Demeter-style choice):

- **one shape, parallelism moves only.** A change of slots, CPU, memory or checkpoint interval
  is a savepoint redeploy (tens of seconds down, then catch-up); a parallelism-only change is an
  in-place rescale (seconds). So the surrogate picks the *shape* (slots, CPU, memory, checkpoint
  interval) once: the cheapest configuration predicted to meet the goals at the planned rate
  whose shape can also grow in place to ``growth`` x that rate. After that only the parallelism
  moves, unless even the shape's largest parallelism is predicted to miss the goals.
- **measured capacity.** Within the shape, the parallelism is sized from the capacity the job
  actually shows (DS2's true processing rates, :class:`CapacityModel`), with the surrogate as
  the prior until the first steady window: ``planned <= utilization x capacity``. Utilization
  below 1 leaves the spare capacity that catches up after a failure (recovery time is about
  downtime x rate / spare) and keeps queueing latency low.
- **scale up early, scale down late.** Scale-ups plan for an upper quantile of the forecast peak
  (and the backlog drain); scale-downs plan for the highest rate planned over the last
  ``down_horizon_s`` and happen only after ``min_dwell_s`` since the last change and when they
  free at least one step. Failures (``numRestarts`` rose) are not read as missing capacity.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

import numpy as np

from flinktune.config_space import Configuration, ConfigSpace
from flinktune.decision import Action, Decision, JobState
from flinktune.policies.capacity import CapacityModel, Shape, measured_capacity, shape_of
from flinktune.policies.profiling import propose_profiling
from flinktune.policies.selection import CandidateScores, score_candidates
from flinktune.stages import PolicyContext

__all__ = ["FlinktunePolicy"]


@dataclass
class FlinktunePolicy:
    """See the module docstring. Rates are rec/s, times seconds."""

    space: ConfigSpace
    confidence: float = 0.95
    quantile: float = 0.9
    catch_up_s: float = 300.0
    utilization: float = 0.65
    growth: float = 1.6
    memory_headroom: float = 0.5
    min_slot_memory_mb: float = 1024.0
    down_horizon_s: float = 3600.0
    min_dwell_s: float = 1200.0
    profile_margin: float = 1.15
    profile_batch: int = 3
    name: str = "flinktune"
    shape: Shape | None = None
    capacity: CapacityModel = field(default_factory=CapacityModel)
    _plans: deque = field(default_factory=deque, repr=False)
    _last_change: float = float("-inf")

    # -- rates -------------------------------------------------------------------------------
    def planned_rate(self, state: JobState, context: PolicyContext) -> tuple[float, str]:
        """The rate to provision for now: max(forecast quantile peak, input + lag drain)."""
        fc = context.forecast
        assert fc is not None
        q = self.quantile if self.quantile in fc.quantiles else max(fc.quantiles, default=None)
        peak = fc.peak(q) if q is not None else fc.peak()
        backlog = max(state.lag, 0.0) / self.catch_up_s if np.isfinite(state.lag) and state.restarts == 0 else 0.0
        now_rate = (state.input_rate if np.isfinite(state.input_rate) else 0.0) + backlog
        if now_rate > peak:
            return now_rate, f"current input {state.input_rate:,.0f} rec/s + lag drain {backlog:,.0f} rec/s"
        return peak, f"forecast p{int(round((q or 0.5) * 100))} peak of the next {fc.horizon_s // 60} min"

    def _sustained(self, now: float, planned: float) -> float:
        """Highest rate planned over the last ``down_horizon_s`` (what a scale-down must still carry)."""
        self._plans.append((now, planned))
        while self._plans and now - self._plans[0][0] > self.down_horizon_s:
            self._plans.popleft()
        return max(r for _, r in self._plans)

    # -- shape -------------------------------------------------------------------------------
    def _in_shape(self, shape: Shape) -> list[Configuration]:
        slots, cpu, mem, ckpt = shape
        out = [Configuration(p, slots, cpu, mem, ckpt) for p in self.space.parallelism if p % slots == 0]
        return [c for c in out if self.space.contains(c)]

    def _roomy(self, surrogate, scores: CandidateScores) -> np.ndarray:
        """Candidates whose predicted heap use stays under ``memory_headroom`` of what they reserve.

        The latency and recovery models see garbage collection and out-of-memory restarts only
        as noise; keeping heap use well below the reservation avoids them altogether.
        """
        X = np.array([self.space.normalise(c) for c in scores.candidates], dtype="float64")
        used = surrogate.predict(X, scores.rate).median("memory_used_mb")
        reserved = np.array([c.total_memory_mb for c in scores.candidates], dtype=float)
        per_slot = np.array([c.memory_mb / c.task_slots for c in scores.candidates], dtype=float)
        # Also a floor per slot (heap state backend: state, buffers and tasks share each slot's heap).
        return (used <= self.memory_headroom * reserved) & (per_slot >= self.min_slot_memory_mb)

    def choose_shape(self, scores: CandidateScores, grown: CandidateScores, roomy: np.ndarray | None = None) -> int | None:
        """Index of the cheapest candidate meeting the goals whose shape can grow in place."""
        roomy = np.ones(len(scores.candidates), dtype=bool) if roomy is None else roomy
        ok_grown = {shape_of(c) for c, p in zip(grown.candidates, grown.p_feasible) if p >= self.confidence}
        feasible = np.flatnonzero((scores.p_feasible >= self.confidence) & roomy)
        # No shape trusted to grow that far: settle for one that carries the planned rate.
        ok = [i for i in feasible if shape_of(scores.candidates[i]) in ok_grown] or list(feasible)
        if not ok:
            return None
        # Cheapest first; among equals the finer parallelism grid (fewer slots), then the higher P.
        return int(min(ok, key=lambda i: (round(float(scores.cost[i]), 6), scores.candidates[i].task_slots, -float(scores.p_feasible[i]))))

    def _size(self, shape: Shape, rate: float, context: PolicyContext) -> tuple[Configuration, str, bool]:
        """(smallest in-shape configuration for ``rate``, why, whether it is enough).

        Sized by measured capacity once there is one, before that by the surrogate (the prior).
        """
        cands = self._in_shape(shape)
        if self.capacity.estimate(cands[-1].parallelism) is not None:
            for c in cands:
                cap = self.capacity.estimate(c.parallelism) or 0.0
                if rate <= self.utilization * cap:
                    return c, f"measured capacity {cap:,.0f} rec/s at p{c.parallelism} (utilization {rate / cap:.0%})", True
        else:
            sc = score_candidates(context.surrogate, self.space, rate, context.latency_target_ms, context.recovery_limit_s, cands)  # type: ignore[arg-type]
            ok = np.flatnonzero(sc.p_feasible >= self.confidence)
            if ok.size:
                return cands[int(ok[0])], f"surrogate prior ({sc.summary(int(ok[0]))})", True
        return cands[-1], "even the shape's largest parallelism is not enough", False

    # -- decide ------------------------------------------------------------------------------
    def decide(self, state: JobState, context: PolicyContext) -> Decision:
        if context.forecast is None or context.surrogate is None:
            missing = "forecaster" if context.forecast is None else "surrogate"
            return Decision.keep(self.name, f"hold: no champion {missing} model is available yet")
        cur = state.config
        if self.shape is None and cur.with_(vertex_parallelism={}) != self.space.maximum:
            # A fresh policy object (a new decision task) on a job already tuned: adopt its shape
            # instead of choosing again, which could cost a redeploy for nothing.
            self.shape = shape_of(cur)
        if self.shape is not None and shape_of(cur) != self.shape:  # changed behind our back (rollback)
            self.shape = shape_of(cur)
            self.capacity.reset()
        if self.shape is not None and not cur.vertex_parallelism:
            cap = measured_capacity(state)
            if cap is not None:
                self.capacity.observe(cur.parallelism, cap)
        planned, why = self.planned_rate(state, context)
        sustained = self._sustained(state.ts, planned)
        inputs = {"planned_rate": planned, "sustained_rate": sustained, "rule": why, "failures_in_window": state.restarts}
        if self.shape is None:
            return self._first_shape(state, context, planned, why, inputs)
        need_up, why_up, fits = self._size(self.shape, planned, context)
        if not fits and cur.parallelism == need_up.parallelism and state.ts - self._last_change >= self.min_dwell_s:
            return self._regrow(state, context, planned, why, inputs)  # outgrown: a bigger shape (a redeploy)
        if need_up.parallelism > cur.parallelism:
            return self._change(state, need_up, f"scale up in place for {planned:,.0f} rec/s ({why}): {why_up}", inputs)
        need_down, why_down, _ = self._size(self.shape, sustained, context)
        if need_down.parallelism < cur.parallelism:
            if state.ts - self._last_change < self.min_dwell_s:
                return Decision.keep(self.name, f"hold p{cur.parallelism}: a scale-down to p{need_down.parallelism} waits for the "
                                     f"{self.min_dwell_s:.0f} s dwell time since the last change", **inputs)  # fmt: skip
            return self._change(state, need_down, f"scale down in place: the highest rate planned over the last "
                                f"{self.down_horizon_s / 60:.0f} min is {sustained:,.0f} rec/s; {why_down}", inputs)  # fmt: skip
        return Decision.keep(self.name, f"p{cur.parallelism} fits {planned:,.0f} rec/s ({why}) and the sustained "
                             f"{sustained:,.0f} rec/s; keep", **inputs)  # fmt: skip

    def _change(self, state: JobState, target: Configuration, reason: str, inputs: dict) -> Decision:
        self._last_change = state.ts
        mode = "in-place rescale" if shape_of(target) == shape_of(state.config) else "savepoint redeploy"
        return Decision(Action.RECONFIGURE, f"{reason}; {target.describe()} by {mode}", self.name, target=target,
                        inputs=dict(inputs, mode=mode, target=target.to_dict()))  # fmt: skip

    def _first_shape(self, state: JobState, context: PolicyContext, planned: float, why: str, inputs: dict) -> Decision:
        covered = float(context.extras.get("profiled_max_rate", 0.0))
        if planned > covered * self.profile_margin:
            configs = propose_profiling(context.surrogate, self.space, planned, context, self.profile_batch, state.config)  # type: ignore[arg-type]
            return Decision(
                Action.PROFILE,
                f"planned rate {planned:,.0f} rec/s ({why}) is beyond what profiling covered (up to {covered:,.0f} rec/s): "
                f"profile {len(configs)} configurations at that rate first",
                self.name, profile_configs=tuple(configs), inputs=inputs,
            )  # fmt: skip
        return self._regrow(state, context, planned, why, inputs)

    def _regrow(self, state: JobState, context: PolicyContext, planned: float, why: str, inputs: dict) -> Decision:
        """Pick the shape (first time, or when the current one cannot carry the load)."""
        args = (context.surrogate, self.space)
        scores = score_candidates(*args, planned, context.latency_target_ms, context.recovery_limit_s)  # type: ignore[arg-type]
        grown = score_candidates(*args, planned * self.growth, context.latency_target_ms, context.recovery_limit_s)  # type: ignore[arg-type]
        best = self.choose_shape(scores, grown, self._roomy(context.surrogate, scores))
        if best is None:
            if self.shape is not None:  # keep the largest in-place parallelism rather than guess
                return Decision.keep(self.name, f"no other shape is predicted to carry {planned:,.0f} rec/s ({why}); keep", **inputs)
            target, note = self.space.maximum, "no configuration is predicted to meet the goals: the maximum"
        else:
            target, note = scores.candidates[best], scores.summary(best)
        if self.shape != shape_of(target):
            self.shape = shape_of(target)
            self.capacity.reset()
        if target == state.config:
            return Decision.keep(self.name, f"shape chosen: the current {target.describe()} ({note})", **inputs)
        return self._change(
            state, target,
            f"choose the shape for {planned:,.0f} rec/s ({why}): the cheapest configuration with P(goals) >= "
            f"{self.confidence} whose shape grows in place to {self.growth:g}x that rate ({note})", inputs,
        )  # fmt: skip
