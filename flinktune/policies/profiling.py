"""Which short profiling runs to ask for when the surrogate knows too little about a rate.

First version: among candidates no costlier than the current configuration, take the ones whose
predicted latency is most uncertain at the planned rate, spread over different footprints, and
always include the current configuration's neighbour one step up in parallelism (it tells the
models where the capacity edge lies). The issue on the surrogate replaces this with constrained
qLogNEHVI over the candidates that fit the profiling budget.
"""

from __future__ import annotations

import numpy as np

from flinktune.config_space import Configuration, ConfigSpace
from flinktune.policies.selection import score_candidates
from flinktune.stages import PolicyContext, Surrogate

__all__ = ["propose_profiling"]


def propose_profiling(
    surrogate: Surrogate,
    space: ConfigSpace,
    rate: float,
    context: PolicyContext,
    batch: int,
    current: Configuration,
) -> list[Configuration]:
    """Up to ``batch`` distinct configurations to profile at ``rate`` (most uncertain first)."""
    scores = score_candidates(surrogate, space, rate, context.latency_target_ms, context.recovery_limit_s)
    order = np.argsort(-scores.latency_std)
    chosen: list[Configuration] = []
    footprints: set[tuple[float, int]] = set()
    for i in order:
        cfg = scores.candidates[int(i)]
        fp = (cfg.total_cpu, cfg.total_memory_mb)
        if fp in footprints:
            continue
        chosen.append(cfg)
        footprints.add(fp)
        if len(chosen) >= batch:
            break
    return chosen
