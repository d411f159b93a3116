"""Which short profiling runs to ask for when the surrogate knows too little about a rate.

As Demeter does it (docs/baselines.md, demeter): constrained multi-objective BO over the candidates
that fit the profiling budget, here qLogNEHVI on the discrete set (``models.surrogate.acquisition``):
objectives are the candidates' reserved CPU and memory, constraints the latency and recovery
models. The budget defaults to the space's own (the static maximum's totals);
``context.profiling_budget = (cpu, memory_mb)`` narrows it. When the acquisition cannot
run (fewer candidates in budget than asked for, or the surrogate is not a BoTorch-backed one), the
most uncertain candidates are taken instead, one per footprint, and the reason says so.
"""

from __future__ import annotations

import logging

import numpy as np

from flinktune.config_space import ConfigSpace, Configuration
from flinktune.decision.stages import PolicyContext, Surrogate
from flinktune.tuner.selection import score_candidates

__all__ = ["most_uncertain", "propose_profiling"]

log = logging.getLogger(__name__)


def most_uncertain(
    surrogate: Surrogate,
    space: ConfigSpace,
    rate: float,
    context: PolicyContext,
    batch: int,
    candidates: list[Configuration] | None = None,
) -> list[Configuration]:
    """Up to ``batch`` candidates with the most uncertain latency at ``rate``, one per footprint."""
    scores = score_candidates(surrogate, space, rate, context.latency_target_ms, context.recovery_limit_s, candidates)
    chosen: list[Configuration] = []
    footprints: set[tuple[float, int]] = set()
    for i in np.argsort(-scores.latency_std):
        cfg = scores.candidates[int(i)]
        fp = (cfg.total_cpu, cfg.total_memory_mb)
        if fp not in footprints:
            chosen.append(cfg)
            footprints.add(fp)
        if len(chosen) >= batch:
            break
    return chosen


def propose_profiling(
    surrogate: Surrogate,
    space: ConfigSpace,
    rate: float,
    context: PolicyContext,
    batch: int,
    current: Configuration,
    candidates: list[Configuration] | None = None,
) -> list[Configuration]:
    """Up to ``batch`` distinct configurations to profile at ``rate`` (qLogNEHVI when it can run),
    among ``candidates`` (default: the whole space)."""
    cands = list(candidates) if candidates is not None else space.candidates()
    reserved = np.array([[c.total_cpu, c.total_memory_mb] for c in cands], dtype="float64")
    cpu_cap, mem_cap = context.profiling_budget or space.budget()
    in_budget = (reserved[:, 0] <= cpu_cap + 1e-9) & (reserved[:, 1] <= mem_cap)
    if int(in_budget.sum()) < batch:
        return most_uncertain(surrogate, space, rate, context, batch, [c for c, ok in zip(cands, in_budget) if ok] or None)
    try:
        from models.surrogate.acquisition import suggest_profiling

        idx = suggest_profiling(
            surrogate,
            np.array([space.normalise(c) for c in cands]),
            float(rate),
            latency_limit_log=float(np.log(context.latency_target_ms)),
            recovery_limit_log=float(np.log(context.recovery_limit_s)),
            budget_mask=in_budget,
            reserved=reserved,
            q=batch,
            seed=0,
        )
    except (TypeError, AttributeError, NotImplementedError) as exc:  # not a BoTorch-backed surrogate
        log.info("qLogNEHVI unavailable for %s (%s): profiling the most uncertain candidates", type(surrogate).__name__, exc)
        return most_uncertain(surrogate, space, rate, context, batch, cands)
    return [cands[int(i)] for i in idx]
