"""Model-based choice over the candidate space: feasibility, cost, and when to profile instead.

Used by the model-based policies (demeter, flinktune). Given a fitted surrogate and a planned
rate, every candidate gets P(latency <= target) x P(recovery <= limit) (the outcomes' models are
independent) and a cost: the sum of its reserved CPU and memory, each relative to the maximum
configuration (so 2.0 is static max). The pick is the cheapest candidate whose probability
reaches the confidence level.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from flinktune.config_space import ConfigSpace, Configuration
from flinktune.decision.stages import Surrogate

__all__ = ["CandidateScores", "relative_cost", "score_candidates"]


def relative_cost(cfg: Configuration, space: ConfigSpace) -> float:
    """Reserved CPU / max CPU + reserved memory / max memory (static max = 2.0)."""
    mx = space.maximum
    return cfg.total_cpu / mx.total_cpu + cfg.total_memory_mb / mx.total_memory_mb


@dataclass(frozen=True)
class CandidateScores:
    """Per-candidate scores at one rate; arrays align with ``candidates``."""

    candidates: list[Configuration]
    rate: float
    p_feasible: np.ndarray
    p_latency: np.ndarray
    p_recovery: np.ndarray
    latency_ms: np.ndarray
    recovery_s: np.ndarray
    latency_std: np.ndarray
    cost: np.ndarray
    #: Predictive standard deviation of the recovery time in model space (log s); None when not given.
    recovery_std: np.ndarray | None = None

    def index_of(self, cfg: Configuration) -> int | None:
        base = cfg.with_(vertex_parallelism={})
        try:
            return self.candidates.index(base)
        except ValueError:
            return None

    def cheapest_feasible(self, confidence: float) -> int | None:
        ok = np.flatnonzero(self.p_feasible >= confidence)
        if ok.size == 0:
            return None
        # Ties in cost: prefer the higher probability, then the shorter checkpoint interval.
        order = sorted(
            ok,
            key=lambda i: (round(float(self.cost[i]), 6), -float(self.p_feasible[i]), self.candidates[i].checkpoint_interval_s),
        )
        return int(order[0])

    def summary(self, i: int) -> str:
        return (
            f"P(goals)={self.p_feasible[i]:.2f}, predicted p95 {self.latency_ms[i]:.0f} ms, "
            f"recovery {self.recovery_s[i]:.0f} s, cost {self.cost[i]:.2f} of 2.00"
        )


def score_candidates(
    surrogate: Surrogate,
    space: ConfigSpace,
    rate: float,
    latency_target_ms: float,
    recovery_limit_s: float,
    candidates: list[Configuration] | None = None,
) -> CandidateScores:
    """Score every candidate (default: the whole space) at ``rate`` with ``surrogate``."""
    cands = candidates if candidates is not None else space.candidates()
    X = np.array([space.normalise(c) for c in cands], dtype="float64")
    pred = surrogate.predict(X, float(rate))
    p_lat = pred.prob_le("latency_ms", latency_target_ms)
    p_rec = pred.prob_le("recovery_s", recovery_limit_s)
    return CandidateScores(
        candidates=cands,
        rate=float(rate),
        p_feasible=p_lat * p_rec,
        p_latency=p_lat,
        p_recovery=p_rec,
        latency_ms=pred.median("latency_ms"),
        recovery_s=pred.median("recovery_s"),
        latency_std=pred.std_of("latency_ms"),
        cost=np.array([relative_cost(c, space) for c in cands]),
        recovery_std=pred.std_of("recovery_s"),
    )
