"""The flinktune policy (ours): choose a shape once from the models, then scale in place.

Why this shape of policy (each point fixes something seen in replays of Demeter-style choice):

- **one shape, parallelism moves only.** A change of slots, CPU, memory or checkpoint interval
  is a savepoint redeploy (tens of seconds down, then catch-up); a parallelism-only change is an
  in-place rescale (seconds). So the surrogate picks the *shape* (slots, CPU, memory, checkpoint
  interval) once, and after that only the parallelism moves, unless even the shape's largest
  parallelism misses the goals at a rate profiling covered.
- **shapes for cost granularity.** Shapes give one core per slot (:func:`shape_candidates`;
  Flink's guidance) and at least ``min_slot_memory_mb`` per slot after the TaskManager's fixed
  overhead, so every parallelism step costs the same few cores. Among them the pick is the shape
  cheapest *over a range of rates* (``range_factors`` x the planned rate), not only at the planned
  rate: a shape with coarse steps (3 slots: 12 or 24 cores) loses to one that follows the load.
  Start-up profiling (:func:`startup_design`) covers only those shapes, with few runs.
- **measured capacity.** Within the shape, the parallelism is sized from the capacity the job
  actually shows (DS2's true processing rates, :class:`CapacityModel`), with the surrogate as
  the prior until the first steady window: ``planned <= utilization x capacity``. Utilization
  below 1 leaves the spare capacity that catches up after a failure (recovery time is about
  downtime x rate / spare) and keeps queueing latency low.
- **scale up early, scale down late, with hysteresis.** Scale-ups plan for an upper quantile of
  the forecast peak (and the backlog drain), once the plan passes ``up_trigger`` of the measured
  capacity, and then size to ``utilization`` (one step covers more of a climb); scale-downs plan
  for the highest rate planned over the last ``down_horizon_s``, size to ``down_utilization``,
  wait ``min_dwell_s`` since the last change and must free ``min_down_step`` parallelism.
  Failures (``numRestarts`` rose) are not read as missing capacity.
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

__all__ = ["FlinktunePolicy", "shape_candidates", "startup_design", "slot_memory_mb", "TM_OVERHEAD_MB"]

#: TaskManager memory no slot can use with Flink's defaults: JVM metaspace 256 MB, framework
#: off-heap 128 MB, and JVM overhead (10%, at least 192 MB), about 576 MB per TaskManager.
TM_OVERHEAD_MB = 576.0


def slot_memory_mb(cfg: Configuration) -> float:
    """Memory each slot of ``cfg`` gets once the TaskManager's fixed overhead is set aside, MB."""
    return (cfg.memory_mb - TM_OVERHEAD_MB) / cfg.task_slots


def shape_candidates(space: ConfigSpace, slot_cores: tuple[float, ...] | None = (1.0,), min_slot_memory_mb: float = 0.0) -> list[Configuration]:
    """The candidates of ``space`` whose TaskManagers give each slot one of ``slot_cores`` cores.

    Flink's guidance is one slot per core: a slot runs one thread per vertex, so a fraction of a
    core throttles every subtask and cores beyond one per slot mostly idle. Restricting shapes to
    that (``slot_cores=(1.0,)``) leaves the models far fewer shapes to tell apart, and every
    parallelism step then costs the same few cores. ``None`` keeps every CPU share. Slots with
    less than ``min_slot_memory_mb`` each (:func:`slot_memory_mb`: a small TaskManager loses most of
    its memory to the fixed overhead) are left out too.
    """
    out = []
    for c in space.candidates():
        share = c.cpu / c.task_slots
        if slot_cores is not None and not any(abs(share - k) < 1e-9 for k in slot_cores):
            continue
        if slot_memory_mb(c) >= min_slot_memory_mb:
            out.append(c)
    return out


def startup_design(space: ConfigSpace, n: int, seed: int, slot_cores: tuple[float, ...] | None = (1.0,),
                   min_slot_memory_mb: float = 512.0) -> list[Configuration]:  # fmt: skip
    """``n`` configurations to profile before the first shape choice: spread over :func:`shape_candidates`.

    Greedy max-min distance on normalised knobs, starting from the largest-parallelism candidate
    with the least memory (it bounds the capacity the shapes can grow to), seeded for ties.
    """
    if n < 1:
        raise ValueError(f"startup design size must be >= 1, got {n}")
    cands = shape_candidates(space, slot_cores, min_slot_memory_mb)
    if not cands:
        raise ValueError(f"startup design: no candidate of the space has {slot_cores} cores and >= {min_slot_memory_mb} MB per slot")
    cands = [cands[i] for i in np.random.default_rng(seed).permutation(len(cands))]
    X = np.array([space.normalise(c) for c in cands])
    first = min(range(len(cands)), key=lambda i: (-cands[i].parallelism, cands[i].total_memory_mb, cands[i].task_slots))
    chosen = [first]
    dist = np.linalg.norm(X - X[first], axis=1)
    while len(chosen) < min(n, len(cands)):
        nxt = int(np.argmax(dist))
        chosen.append(nxt)
        dist = np.minimum(dist, np.linalg.norm(X - X[nxt], axis=1))
    return [cands[i] for i in chosen]


@dataclass
class FlinktunePolicy:
    """See the module docstring. Rates are rec/s, times seconds."""

    space: ConfigSpace
    confidence: float = 0.95
    quantile: float = 0.9
    catch_up_s: float = 300.0
    utilization: float = 0.75
    down_utilization: float = 0.75
    up_trigger: float = 0.85
    min_down_step: int = 8
    growth: float = 1.6
    range_factors: tuple[float, ...] = (0.5, 0.75, 1.0, 1.3, 1.6)
    slot_cores: tuple[float, ...] | None = (1.0,)
    fallback_confidence: float = 0.6
    memory_headroom: float = 0.5
    min_slot_memory_mb: float = 512.0
    down_horizon_s: float = 1800.0
    min_dwell_s: float = 900.0
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
        per_slot = np.array([slot_memory_mb(c) for c in scores.candidates], dtype=float)
        # Also a floor per slot (heap state backend: state, buffers and tasks share each slot's heap).
        return (used <= self.memory_headroom * reserved) & (per_slot >= self.min_slot_memory_mb)

    def choose_shape(self, by_rate: list[CandidateScores], grown: CandidateScores, roomy: np.ndarray | None = None,
                     confidence: float | None = None) -> int | None:  # fmt: skip
        """Index (into ``by_rate[0]``) of the candidate whose shape is cheapest over a range of rates.

        ``by_rate`` holds the scores of the same candidates at several rates, the planned rate
        first; ``grown`` at the planned rate x ``growth``. A shape's expected cost is the mean, over
        those rates, of its cheapest candidate predicted to meet the goals there (a shape that
        carries none of them at some rate pays its largest candidate's cost there): so a shape
        whose parallelism steps are coarse or whose slots carry expensive CPU or memory loses
        to one that follows the load in small, cheap steps, not only at the planned rate.
        Only shapes trusted to grow in place to ``growth`` x the planned rate compete (all
        feasible ones when none is). ``roomy`` masks candidates allowed at the planned rate;
        ``confidence`` defaults to the policy's.
        """
        conf = self.confidence if confidence is None else confidence
        scores = by_rate[0]
        roomy = np.ones(len(scores.candidates), dtype=bool) if roomy is None else roomy
        ok_grown = {shape_of(c) for c, p in zip(grown.candidates, grown.p_feasible) if p >= conf}
        feasible = np.flatnonzero((scores.p_feasible >= conf) & roomy)
        ok = [i for i in feasible if shape_of(scores.candidates[i]) in ok_grown] or list(feasible)
        if not ok:
            return None
        shapes = {shape_of(scores.candidates[i]) for i in ok}
        members = {s: [j for j, c in enumerate(scores.candidates) if shape_of(c) == s] for s in shapes}

        def expected(shape: Shape) -> float:
            idx = members[shape]
            worst = max(float(scores.cost[j]) for j in idx)
            per_rate = []
            for sc in by_rate:
                fit = [float(sc.cost[j]) for j in idx if sc.p_feasible[j] >= conf]
                per_rate.append(min(fit) if fit else worst)
            return float(np.mean(per_rate))

        cost = {s: round(expected(s), 6) for s in shapes}
        # Cheapest shape first; then the cheapest of its candidates now, fewer slots, higher P.
        return int(min(ok, key=lambda i: (cost[shape_of(scores.candidates[i])], round(float(scores.cost[i]), 6),
                                          scores.candidates[i].task_slots, -float(scores.p_feasible[i]))))  # fmt: skip

    def _size(self, shape: Shape, rate: float, context: PolicyContext, utilization: float | None = None) -> tuple[Configuration, str, bool]:
        """(smallest in-shape configuration for ``rate``, why, whether it is enough).

        Sized by measured capacity once there is one (``rate <= utilization x capacity``,
        ``utilization`` defaulting to the policy's), before that by the surrogate (the prior).
        """
        util = self.utilization if utilization is None else utilization
        cands = self._in_shape(shape)
        if self.capacity.estimate(cands[-1].parallelism) is not None:
            for c in cands:
                cap = self.capacity.estimate(c.parallelism) or 0.0
                if rate <= util * cap:
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
            covered = float(context.extras.get("profiled_max_rate", 0.0))
            if planned <= covered * self.profile_margin:  # outgrown: a bigger shape (a redeploy)
                return self._regrow(state, context, planned, why, inputs)
            # Beyond what profiling covered the surrogate extrapolates (and has proposed tiny
            # shapes for huge rates): the largest in-place parallelism is the safer bet.
            return Decision.keep(self.name, f"p{cur.parallelism} is the shape's largest; {planned:,.0f} rec/s ({why}) is beyond "
                                 f"what profiling covered ({covered:,.0f} rec/s) to trust another shape: keep", **inputs)  # fmt: skip
        cur_cap = self.capacity.estimate(cur.parallelism)
        # Hysteresis upwards: a measured size keeps until the plan passes ``up_trigger`` of its
        # capacity, and then grows to ``utilization``, so one step covers more of the climb.
        room = cur_cap is not None and planned <= max(self.up_trigger, self.utilization) * cur_cap
        if need_up.parallelism > cur.parallelism and not room:
            return self._change(state, need_up, f"scale up in place for {planned:,.0f} rec/s ({why}): {why_up}", inputs)
        # Hysteresis: a scale-down must leave the smaller size at most ``down_utilization`` busy,
        # below the scale-up threshold, so a load hovering at one boundary does not flap.
        need_down, why_down, _ = self._size(self.shape, sustained, context, min(self.down_utilization, self.utilization))
        # A scale-down must free at least ``min_down_step`` parallelism: fewer, larger steps down.
        if need_down.parallelism <= cur.parallelism - max(self.min_down_step, 1):
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
        goals = (context.latency_target_ms, context.recovery_limit_s, shape_candidates(self.space, self.slot_cores, self.min_slot_memory_mb))
        factors = [1.0] + [f for f in self.range_factors if f != 1.0]
        by_rate = [score_candidates(*args, planned * f, *goals) for f in factors]  # type: ignore[arg-type]
        scores = by_rate[0]
        grown = score_candidates(*args, planned * self.growth, *goals)  # type: ignore[arg-type]
        roomy = self._roomy(context.surrogate, scores)
        best = self.choose_shape(by_rate, grown, roomy)
        if best is None and self.shape is None:
            # Nothing is trusted at the confidence level (few profiling runs, a rate at their edge):
            # settle for a likely one; measured capacity and the guard's rollback correct it.
            best = self.choose_shape(by_rate, grown, roomy, confidence=self.fallback_confidence)
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
            f"choose the shape for {planned:,.0f} rec/s ({why}): the shape cheapest over {min(factors):g}-{max(factors):g}x "
            f"that rate with P(goals) >= {self.confidence} that grows in place to {self.growth:g}x it ({note})", inputs,
        )  # fmt: skip
