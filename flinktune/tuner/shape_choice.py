"""Which shape to run: ranked by measured capacity, or by the surrogate before any measurement.

Use :func:`rank_shapes` once some shape's capacity has been measured (the static maximum's first
window seeds it): every shape is sized for the rate by capacity and ranked by cost, the surrogate
only a relative check. Use :func:`choose_shape` before that, on the surrogate's scores alone: the
shape cheapest over a range of rates, not only at the planned one. :func:`roomy` masks candidates
whose predicted heap use leaves headroom. A shape is ``(task_slots, cpu, memory_mb,
checkpoint_interval_s)`` (:data:`flinktune.tuner.capacity.Shape`).
"""

from __future__ import annotations

import numpy as np

from flinktune.config_space import ConfigSpace, Configuration
from flinktune.decision.stages import PolicyContext, Surrogate
from flinktune.tuner.capacity import Shape, ShapeCapacities, shape_of
from flinktune.tuner.selection import CandidateScores, relative_cost, score_candidates
from flinktune.tuner.shapes import SizedShape, shape_configs, slot_memory_mb

__all__ = ["choose_shape", "rank_shapes", "roomy"]


def roomy(
    surrogate: Surrogate, space: ConfigSpace, scores: CandidateScores, memory_headroom: float, min_slot_memory_mb: float
) -> np.ndarray:
    """Candidates of ``scores`` whose predicted heap use stays under ``memory_headroom`` of what they reserve.

    The latency and recovery models see garbage collection and out-of-memory restarts only
    as noise; keeping heap use well below the reservation avoids them altogether.
    """
    X = np.array([space.normalise(c) for c in scores.candidates], dtype="float64")
    used = surrogate.predict(X, scores.rate).median("memory_used_mb")
    reserved = np.array([c.total_memory_mb for c in scores.candidates], dtype=float)
    per_slot = np.array([slot_memory_mb(c) for c in scores.candidates], dtype=float)
    # Also a floor per slot (heap state backend: state, buffers and tasks share each slot's heap).
    return (used <= memory_headroom * reserved) & (per_slot >= min_slot_memory_mb)


def choose_shape(
    by_rate: list[CandidateScores], grown: CandidateScores, confidence: float, mask: np.ndarray | None = None
) -> int | None:
    """Index (into ``by_rate[0]``) of the candidate whose shape is cheapest over a range of rates.

    ``by_rate`` holds the scores of the same candidates at several rates, the planned rate
    first; ``grown`` at the planned rate x the growth the shape must allow. A shape's expected
    cost is the mean, over those rates, of its cheapest candidate predicted to meet the goals
    there with P >= ``confidence`` (a shape that carries none of them at some rate pays its
    largest candidate's cost there): so a shape whose parallelism steps are coarse or whose
    slots carry expensive CPU or memory loses to one that follows the load in small, cheap
    steps, not only at the planned rate. Only shapes trusted to carry ``grown`` compete (all
    feasible ones when none is). ``mask`` (e.g. :func:`roomy`) marks candidates allowed at the
    planned rate. None when no candidate reaches ``confidence``.
    """
    scores = by_rate[0]
    mask = np.ones(len(scores.candidates), dtype=bool) if mask is None else mask
    ok_grown = {shape_of(c) for c, p in zip(grown.candidates, grown.p_feasible) if p >= confidence}
    feasible = np.flatnonzero((scores.p_feasible >= confidence) & mask)
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
            fit = [float(sc.cost[j]) for j in idx if sc.p_feasible[j] >= confidence]
            per_rate.append(min(fit) if fit else worst)
        return float(np.mean(per_rate))

    cost = {s: round(expected(s), 6) for s in shapes}
    # Cheapest shape first; then the cheapest of its candidates now, fewer slots, higher P.
    return int(
        min(
            ok,
            key=lambda i: (
                cost[shape_of(scores.candidates[i])],
                round(float(scores.cost[i]), 6),
                scores.candidates[i].task_slots,
                -float(scores.p_feasible[i]),
            ),
        )
    )


def rank_shapes(
    space: ConfigSpace,
    shapes: list[Shape],
    capacities: ShapeCapacities,
    rate: float,
    context: PolicyContext,
    *,
    utilization: float,
    growth: float,
    grow_utilization: float,
    shape_check: float,
    reference: Configuration | None = None,
) -> list[SizedShape]:
    """Every one of ``shapes`` with a capacity estimate, sized for ``rate``, cheapest first.

    A shape takes part when capacity carries ``rate`` within its parallelism range (``rate <=
    utilization x capacity``) and the surrogate does not rate its sized configuration clearly
    worse than ``reference`` (the running shape sized for the same rate): P(goals) >=
    ``shape_check`` x the reference's. The check is relative because a surrogate fitted on a
    dozen runs is often unsure in absolute terms across the space, while it still separates
    configurations it has seen fail. A shape ``grows`` when its largest parallelism carries
    ``growth`` x the rate at ``grow_utilization``. Order: relative cost, then shapes that grow,
    then the shorter checkpoint interval (a failure replays up to one interval, so it bounds
    recovery; its pause cost is in the measured capacity), then fewer slots.
    """
    sized: list[tuple[Shape, Configuration, float, bool, bool]] = []
    for shape in shapes:
        cands = shape_configs(space, shape)
        caps = [capacities.estimate(shape, c.parallelism) for c in cands]
        if not cands or caps[-1] is None:
            continue
        fit = next(((c, cap) for c, cap in zip(cands, caps) if cap and rate <= utilization * cap), None)
        if fit is None:
            continue
        grows = growth * rate <= grow_utilization * float(caps[-1])
        sized.append((shape, fit[0], float(fit[1]), grows, capacities.measured(shape)))
    if not sized:
        return []
    configs = [c for _, c, _, _, _ in sized] + ([reference] if reference is not None else [])
    scores = score_candidates(context.surrogate, space, rate, context.latency_target_ms, context.recovery_limit_s, configs)  # type: ignore[arg-type]  # callers pass a context with a surrogate (decide() checks it)
    floor = shape_check * float(scores.p_feasible[-1]) if reference is not None else 0.0
    out = [
        SizedShape(shape, cfg, cap, relative_cost(cfg, space), float(scores.p_feasible[k]), grows, measured)
        for k, (shape, cfg, cap, grows, measured) in enumerate(sized)
        if scores.p_feasible[k] >= floor
    ]
    return sorted(out, key=lambda o: (round(o.cost, 6), not o.grows, o.shape[3], o.shape[0], -o.p_goals))
