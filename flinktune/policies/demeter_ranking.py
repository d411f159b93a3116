"""How Demeter ranks candidates: its constraint check on predicted latency and recovery, its scalarised
CPU and memory objective, and the screen that removes the cheapest feasible candidates before ranking.

Use these from :class:`flinktune.policies.demeter.DemeterPolicy` (which re-exports them) or to score
candidates the way Demeter would; arrays are one entry per candidate. The published rescale decision
is in ``docs/baselines.md`` (demeter: rescale decision).
"""

from __future__ import annotations

import math

import numpy as np

from flinktune.config_space import ConfigSpace, Configuration
from flinktune.policies.demeter_constraints import BAD_LATENCY
from flinktune.tuner.selection import CandidateScores

__all__ = ["demeter_objective", "demeter_reference", "meets_constraints", "screen_candidates"]

#: Demeter's margin between an objective's log-maximum and its hypervolume reference point: the
#: largest |N(0, 0.1)| of 1e5 draws (about 0.45), beside 10 % of the log-maximum (docs/baselines.md, demeter).
_REF_MARGIN = 0.45


def meets_constraints(
    scores: CandidateScores, latency_target_ms: float, recovery_limit_s: float, scaler: float = 1.25
) -> np.ndarray:
    """Demeter's constraint check per candidate (docs/baselines.md, demeter: rescale decision step 3): the predicted mean + 1 std
    (model space: log ms, log s) in linear space, scaled by ``scaler``, within each boundary.
    Latency is normalised as Demeter does, ``tanh(log_4(latency / lowest))`` against 0.5, with the
    lowest profiled latency taken as ``latency_target_ms / 4^atanh(0.5)``."""
    lowest = latency_target_ms / BAD_LATENCY
    lat_hi = np.exp(np.log(np.maximum(scores.latency_ms, 1e-9)) + scores.latency_std)
    norm = np.maximum(0.0, np.tanh(np.log(np.maximum(lat_hi / lowest, 1e-12)) / math.log(4.0)))
    rec_std = scores.recovery_std if scores.recovery_std is not None else np.zeros(len(scores.candidates))
    rec_hi = np.exp(np.log(np.maximum(scores.recovery_s, 1e-9)) + rec_std)
    return (scaler * norm <= 0.5) & (scaler * rec_hi <= recovery_limit_s)


def demeter_reference(space: ConfigSpace) -> tuple[float, float]:
    """Demeter's hypervolume reference (its objective thresholds) for log total CPU and log total
    memory (MB): ``max(1.1 v, v + 0.45)`` with ``v`` the log of the space maximum's total (docs/baselines.md, demeter)."""
    mx = space.maximum
    cpu, mem = (math.log(most) for most in (mx.total_cpu, mx.total_memory_mb))
    return max(1.1 * cpu, cpu + _REF_MARGIN), max(1.1 * mem, mem + _REF_MARGIN)


def demeter_objective(cfg: Configuration, space: ConfigSpace) -> float:
    """Demeter's scalarised usage of ``cfg``: ``log(total CPU) / ref_cpu + log(total memory) / ref_mem``
    (docs/baselines.md, demeter: rescale decision step 3; lower is better; the maximum configuration scores just under 2)."""
    ref_cpu, ref_mem = demeter_reference(space)
    return math.log(cfg.total_cpu) / ref_cpu + math.log(cfg.total_memory_mb) / ref_mem


def screen_candidates(usages: np.ndarray, feasible: np.ndarray, factor: float = 1.25, quantile: float = 0.25) -> np.ndarray:
    """Indices of the feasible candidates Demeter ranks. ``usages`` is candidates x objectives (the
    reserved totals, linear); per objective, a candidate stays when its usage is at least
    ``max(factor x the cheapest, the quantile-th percentile)`` of the feasible candidates' usages,
    and it must stay on every objective. When that leaves none, the candidates that stay on the
    most objectives remain (all of them when none stays on any: the screen then removes nothing)."""
    idx = np.flatnonzero(feasible)
    if idx.size == 0:
        return idx
    u = np.asarray(usages, dtype=float)[idx].reshape(idx.size, -1)
    floors = np.maximum(factor * u.min(axis=0), np.quantile(u, quantile, axis=0))
    passed = (u >= floors - 1e-9).sum(axis=1)
    return idx[passed == passed.max()]
