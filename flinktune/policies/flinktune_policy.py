"""The flinktune policy (ours): shapes ranked by measured capacity, in-place scaling, rare re-shaping.

Why this shape of policy (each point fixes something seen in replays of Demeter-style choice):

- **a shape, parallelism moves in place.** A change of slots, CPU, memory or checkpoint interval
  is a savepoint redeploy (tens of seconds down, then catch-up); a parallelism-only change is an
  in-place rescale (seconds). So the policy picks a *shape* (slots, CPU, memory, checkpoint
  interval) and then mostly moves the parallelism; the shape changes only when the current one
  cannot carry the load (outgrown) or another has carried it clearly cheaper for a while.
- **shapes for cost granularity.** Shapes give each slot 0.5, 0.75 or 1 core (:data:`SLOT_CORES`,
  :func:`shape_candidates`) and at least ``min_slot_memory_mb`` after the TaskManager's fixed
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
- **scale up early, scale down late, re-shape rarely.** Scale-ups plan for an upper quantile of
  the forecast peak (and the backlog drain) once the plan passes ``up_trigger`` of the measured
  capacity, and then size to ``utilization``; scale-downs plan for the highest rate planned over
  the last ``down_horizon_s``, size to ``down_utilization``, wait ``min_dwell_s`` since the last
  change and must free ``min_down_step`` parallelism. A shape re-choice to save needs a saving of
  ``shape_saving`` held for ``shape_dwell_s`` (a short dip resets it). Optional changes
  (scale-downs, re-shaping to save) keep within ``change_budget`` per ``budget_window_s``;
  scale-ups never wait. Failures (``numRestarts`` rose) are not read as missing capacity.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

import numpy as np

from flinktune.config_space import Configuration, ConfigSpace, spread_design
from flinktune.decision import Action, Decision, JobState
from flinktune.policies.capacity import CapacityModel, Shape, ShapeCapacities, measured_capacity, shape_of, slot_share
from flinktune.policies.profiling import propose_profiling
from flinktune.policies.selection import CandidateScores, relative_cost, score_candidates
from flinktune.stages import PolicyContext

__all__ = ["FlinktunePolicy", "SizedShape", "shape_candidates", "startup_design", "slot_memory_mb", "TM_OVERHEAD_MB", "SLOT_CORES"]

#: TaskManager memory no slot can use with Flink's defaults: JVM metaspace 256 MB, framework
#: off-heap 128 MB, and JVM overhead (10%, at least 192 MB), about 576 MB per TaskManager.
TM_OVERHEAD_MB = 576.0

#: Cores per slot the policy's shapes may give: fractions of a core are fully used by a slot's
#: CPU-bound threads and make the cost steps finer and the low-load floor lower (p8 x 0.5 core =
#: 4 cores instead of 8); more than one core per slot is worth less per core.
SLOT_CORES: tuple[float, ...] = (0.5, 0.75, 1.0)


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


def startup_design(space: ConfigSpace, n: int, seed: int, slot_cores: tuple[float, ...] | None = SLOT_CORES,
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
    def largest_leanest(cs: list[Configuration]) -> int:
        return min(range(len(cs)), key=lambda i: (-cs[i].parallelism, cs[i].total_memory_mb, cs[i].task_slots))

    return spread_design(space, cands, n, seed, largest_leanest)


@dataclass(frozen=True)
class SizedShape:
    """A shape sized for one rate: the smallest in-shape ``config`` with ``rate <= utilization x
    capacity``, its estimated ``capacity`` (rec/s), its relative ``cost`` (static max = 2.0), the
    surrogate's ``p_goals`` there, whether it can ``grow`` in place to ``growth`` x the rate, and
    whether its capacity was ``measured`` on this shape (else transferred by cores per slot)."""

    shape: Shape
    config: Configuration
    capacity: float
    cost: float
    p_goals: float
    grows: bool
    measured: bool

    def describe(self) -> str:
        src = "measured" if self.measured else "estimated from the measured shape by cores per slot"
        return (f"{self.config.describe()} ({slot_share(self.shape):g} core per slot): capacity {self.capacity:,.0f} rec/s {src}, "
                f"cost {self.cost:.2f} of 2.00, P(goals)={self.p_goals:.2f}")  # fmt: skip


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
    name: str = "flinktune"
    shape: Shape | None = None
    capacities: ShapeCapacities = field(default_factory=ShapeCapacities)
    _plans: deque = field(default_factory=deque, repr=False)
    _last_change: float = float("-inf")
    _pending_since: float | None = None
    _changes: deque = field(default_factory=deque, repr=False)

    @property
    def capacity(self) -> CapacityModel:
        """The capacity model of the current shape (an empty one before a shape is chosen)."""
        return self.capacities.model(self.shape) if self.shape is not None else CapacityModel()

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

        Sized by capacity once there is an estimate (``rate <= utilization x capacity``,
        ``utilization`` defaulting to the policy's): measured on the shape, or transferred from
        the shape measured last (:class:`ShapeCapacities`); before that by the surrogate (the prior).
        """
        util = self.utilization if utilization is None else utilization
        cands = self._in_shape(shape)
        if self.capacities.estimate(shape, cands[-1].parallelism) is not None:
            what = "measured" if self.capacities.measured(shape) else "estimated"
            for c in cands:
                cap = self.capacities.estimate(shape, c.parallelism) or 0.0
                if rate <= util * cap:
                    return c, f"{what} capacity {cap:,.0f} rec/s at p{c.parallelism} (utilization {rate / cap:.0%})", True
        else:
            sc = score_candidates(context.surrogate, self.space, rate, context.latency_target_ms, context.recovery_limit_s, cands)  # type: ignore[arg-type]
            ok = np.flatnonzero(sc.p_feasible >= self.confidence)
            if ok.size:
                return cands[int(ok[0])], f"surrogate prior ({sc.summary(int(ok[0]))})", True
        return cands[-1], "even the shape's largest parallelism is not enough", False

    def _candidates(self) -> list[Configuration]:
        """:func:`shape_candidates` of the space, or every candidate when those rules leave none.

        The rules (cores and memory per slot) are preferences for a rich space; a small space, such
        as a one-machine cluster with 1 GB TaskManagers, may have nothing else to offer.
        """
        return shape_candidates(self.space, self.slot_cores, self.min_slot_memory_mb) or self.space.candidates()

    def _shapes(self) -> list[Shape]:
        """The shapes the policy may choose (from :meth:`_candidates`), in a fixed order."""
        return sorted({shape_of(c) for c in self._candidates()})

    def rank_shapes(self, rate: float, context: PolicyContext, reference: Configuration | None = None,
                    utilization: float | None = None) -> list[SizedShape]:  # fmt: skip
        """Every shape with a capacity estimate, sized for ``rate``, cheapest first.

        Use it to pick or re-pick the shape. A shape takes part when capacity carries ``rate``
        within its parallelism range (at ``utilization``) and the surrogate does not rate its
        sized configuration clearly worse than ``reference`` (the running shape sized for the
        same rate): P(goals) >= ``shape_check`` x the reference's. The check is relative because
        a surrogate fitted on a dozen runs is often unsure in absolute terms across the space,
        while it still separates configurations it has seen fail. Order: relative cost, then
        shapes that can grow in place to ``growth`` x the rate, then the shorter checkpoint interval
        (a failure replays up to one interval, so it bounds recovery; its pause cost is in the
        measured capacity), then fewer slots.
        """
        util = self.utilization if utilization is None else utilization
        sized: list[tuple[Shape, Configuration, float, bool, bool]] = []
        for shape in self._shapes():
            cands = self._in_shape(shape)
            caps = [self.capacities.estimate(shape, c.parallelism) for c in cands]
            if not cands or caps[-1] is None:
                continue
            fit = next(((c, cap) for c, cap in zip(cands, caps) if cap and rate <= util * cap), None)
            if fit is None:
                continue
            grows = self.growth * rate <= self.utilization * float(caps[-1])
            sized.append((shape, fit[0], float(fit[1]), grows, self.capacities.measured(shape)))
        if not sized:
            return []
        configs = [c for _, c, _, _, _ in sized] + ([reference] if reference is not None else [])
        scores = score_candidates(context.surrogate, self.space, rate, context.latency_target_ms, context.recovery_limit_s, configs)  # type: ignore[arg-type]
        floor = self.shape_check * float(scores.p_feasible[-1]) if reference is not None else 0.0
        out = [SizedShape(shape, cfg, cap, relative_cost(cfg, self.space), float(scores.p_feasible[k]), grows, measured)
               for k, (shape, cfg, cap, grows, measured) in enumerate(sized) if scores.p_feasible[k] >= floor]  # fmt: skip
        return sorted(out, key=lambda o: (round(o.cost, 6), not o.grows, o.shape[3], o.shape[0], -o.p_goals))

    def _best_shape(self, rate: float, context: PolicyContext, reference: Configuration | None = None,
                    utilization: float | None = None) -> SizedShape | None:  # fmt: skip
        ranked = self.rank_shapes(rate, context, reference, utilization)
        growing = [o for o in ranked if o.grows]
        return (growing or ranked or [None])[0]

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
            self._pending_since = None
        if not cur.vertex_parallelism:
            # Every steady window measures the running shape, the static maximum before the first
            # choice included: that measurement is what the first shape is ranked by.
            cap = measured_capacity(state)
            if cap is not None:
                self.capacities.observe(shape_of(cur), cur.parallelism, cap)
        planned, why = self.planned_rate(state, context)
        sustained = self._sustained(state.ts, planned)
        inputs = {"planned_rate": planned, "sustained_rate": sustained, "rule": why, "failures_in_window": state.restarts}
        if self.shape is None:
            return self._first_shape(state, context, planned, why, inputs)
        need_up, why_up, fits = self._size(self.shape, planned, context)
        if not fits and cur.parallelism == need_up.parallelism and state.ts - self._last_change >= self.min_dwell_s:
            # Outgrown: a bigger shape (a redeploy), ranked by capacity when there is a measured
            # one; the surrogate alone only within what profiling covered (beyond it, it
            # extrapolates, and has proposed tiny shapes for huge rates).
            covered = float(context.extras.get("profiled_max_rate", 0.0))
            if self._best_shape(planned, context, need_up) is not None or planned <= covered * self.profile_margin:
                return self._regrow(state, context, planned, why, inputs)
            return Decision.keep(self.name, f"p{cur.parallelism} is the shape's largest; {planned:,.0f} rec/s ({why}) is beyond "
                                 f"what profiling covered ({covered:,.0f} rec/s) to trust another shape: keep", **inputs)  # fmt: skip
        cur_cap = self.capacity.estimate(cur.parallelism)
        # Hysteresis upwards: a measured size keeps until the plan passes ``up_trigger`` of its
        # capacity, and then grows to ``utilization``, so one step covers more of the climb.
        room = cur_cap is not None and planned <= max(self.up_trigger, self.utilization) * cur_cap
        if need_up.parallelism > cur.parallelism and not room:
            self._pending_since = None
            return self._change(state, need_up, f"scale up in place for {planned:,.0f} rec/s ({why}): {why_up}", inputs)
        # Hysteresis: a scale-down must leave the smaller size at most ``down_utilization`` busy,
        # below the scale-up threshold, so a load hovering at one boundary does not flap.
        need_down, why_down, _ = self._size(self.shape, sustained, context, min(self.down_utilization, self.utilization))
        # A scale-down must free at least ``min_down_step`` parallelism: fewer, larger steps down.
        down = need_down.parallelism <= cur.parallelism - max(self.min_down_step, 1)
        budget = self._over_budget(state.ts)
        if down and budget is not None:
            return Decision.keep(self.name, f"hold p{cur.parallelism}: a scale-down to p{need_down.parallelism} waits: {budget}", **inputs)
        if down and state.ts - self._last_change >= self.min_dwell_s:
            return self._change(state, need_down, f"scale down in place: the highest rate planned over the last "
                                f"{self.down_horizon_s / 60:.0f} min is {sustained:,.0f} rec/s; {why_down}", inputs)  # fmt: skip
        reshape = self._reshape(state, context, max(planned, sustained), inputs) if budget is None else None
        if reshape is not None:
            return reshape
        if down:
            return Decision.keep(self.name, f"hold p{cur.parallelism}: a scale-down to p{need_down.parallelism} waits for the "
                                 f"{self.min_dwell_s:.0f} s dwell time since the last change", **inputs)  # fmt: skip
        return Decision.keep(self.name, f"p{cur.parallelism} fits {planned:,.0f} rec/s ({why}) and the sustained "
                             f"{sustained:,.0f} rec/s; keep", **inputs)  # fmt: skip

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
        now_cfg, _, now_fits = self._size(self.shape, regime, context, self.reshape_utilization)
        best = self._best_shape(regime, context, now_cfg, self.reshape_utilization)
        now_cost = relative_cost(now_cfg, self.space) if now_fits else float("inf")
        if best is None or best.shape == self.shape or not best.grows or best.cost > (1.0 - self.shape_saving) * now_cost:
            self._pending_since = None
            return None
        saving = 1.0 - best.cost / now_cost if np.isfinite(now_cost) else 1.0
        if self._pending_since is None:
            self._pending_since = state.ts
        held = state.ts - self._pending_since
        if held < self.shape_dwell_s or state.ts - self._last_change < self.min_dwell_s:
            return Decision.keep(self.name, f"keep {state.config.describe()}: for the {regime:,.0f} rec/s of the last "
                                 f"{self.down_horizon_s / 60:.0f} min shape {best.describe()} would save {saving:.0%} "
                                 f"(vs {now_cfg.describe()}, cost {now_cost:.2f}); re-choose the shape once that has held "
                                 f"{self.shape_dwell_s / 60:.0f} min (held {held / 60:.0f} min)", **inputs)  # fmt: skip
        self._pending_since = None
        self.shape = best.shape
        return self._change(state, best.config, f"re-choose the shape: for {held / 60:.0f} min the load (now {regime:,.0f} rec/s, "
                            f"the highest planned over the last {self.down_horizon_s / 60:.0f} min) has been carried "
                            f"{saving:.0%} cheaper by {best.describe()} than by {now_cfg.describe()} (cost {now_cost:.2f})",
                            dict(inputs, shape_saving=saving))  # fmt: skip

    def _over_budget(self, now: float) -> str | None:
        """Why an optional change (a scale-down, a shape re-choice to save) must wait, or None.

        At most ``change_budget`` changes in any ``budget_window_s``: every change is a restart
        of some kind, and the service pays for each. Scale-ups and outgrown shapes never wait.
        """
        while self._changes and now - self._changes[0] >= self.budget_window_s:
            self._changes.popleft()
        if len(self._changes) < self.change_budget:
            return None
        free = self._changes[0] + self.budget_window_s - now
        return (f"{len(self._changes)} changes in the last {self.budget_window_s / 3600:g} h already use the budget of "
                f"{self.change_budget}; the next optional change can come in {free / 60:.0f} min")  # fmt: skip

    def _change(self, state: JobState, target: Configuration, reason: str, inputs: dict) -> Decision:
        self._last_change = state.ts
        self._changes.append(state.ts)
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
        """Pick the shape (first time, or when the current one cannot carry the load).

        By capacity (:meth:`rank_shapes`) once any shape has been measured; before that by the
        surrogate alone (:meth:`_surrogate_shape`).
        """
        best = self._best_shape(planned, context, state.config.with_(vertex_parallelism={}))
        if best is None:
            return self._surrogate_shape(state, context, planned, why, inputs)
        self.shape = best.shape
        self._pending_since = None
        if best.config == state.config:
            return Decision.keep(self.name, f"shape chosen: the current {best.describe()}", **inputs)
        grow = f"grows in place to {self.growth:g}x that rate" if best.grows else "the largest capacity (none grows to " \
            f"{self.growth:g}x that rate in place)"  # fmt: skip
        return self._change(state, best.config, f"choose the shape for {planned:,.0f} rec/s ({why}): the cheapest at "
                            f"utilization {self.utilization:.0%} that {grow}: {best.describe()}", inputs)  # fmt: skip

    def _surrogate_shape(self, state: JobState, context: PolicyContext, planned: float, why: str, inputs: dict) -> Decision:
        """The shape from the surrogate alone (no capacity measured yet): cheapest over a range of rates."""
        args = (context.surrogate, self.space)
        goals = (context.latency_target_ms, context.recovery_limit_s, self._candidates())
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
        self.shape = shape_of(target)
        if target == state.config:
            return Decision.keep(self.name, f"shape chosen: the current {target.describe()} ({note})", **inputs)
        return self._change(
            state, target,
            f"choose the shape for {planned:,.0f} rec/s ({why}): the shape cheapest over {min(factors):g}-{max(factors):g}x "
            f"that rate with P(goals) >= {self.confidence} that grows in place to {self.growth:g}x it ({note})", inputs,
        )  # fmt: skip
