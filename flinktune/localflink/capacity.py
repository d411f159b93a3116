"""A measured capacity model of the local job, usable as the policy's ``Surrogate``.

Use :class:`CapacitySurrogate` when the policy must decide for the local cluster from a handful
of profiling runs (too few for Gaussian processes over four outcomes): each parallelism has a
capacity measured on this machine (records/s the window vertex can take, from counter deltas:
throughput / busy fraction, which LOCAL_FLINK_NOTES found right within a few % for this job
shape), a base latency and a measured recovery time. Latency at utilisation u grows as
``base * (1 + 0.5 u / (1 - u))`` (queueing) and is effectively unbounded at u >= 1 (the backlog
grows). Predictions follow :class:`models.surrogate.types.SurrogatePrediction` (log space for
latency and recovery) with a fixed log-std reflecting run-to-run noise on a shared 2-core box.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from flinktune.config_space import ConfigSpace
from models.surrogate.types import OUTCOMES, SurrogatePrediction

__all__ = ["CapacitySurrogate"]

_OVERLOADED_MS = 600_000.0


@dataclass
class CapacitySurrogate:
    """``capacity`` and ``base_latency_ms`` per parallelism (measured); ``space`` de-normalises X."""

    space: ConfigSpace
    capacity: dict[int, float]
    base_latency_ms: dict[int, float]
    recovery_s: float
    cpu_core_s_per_record: float
    memory_used_mb: float
    log_std: float = 0.25
    outcomes: tuple[str, ...] = OUTCOMES

    def __post_init__(self) -> None:
        for p in self.space.parallelism:
            if p not in self.capacity or p not in self.base_latency_ms:
                raise ValueError(f"capacity model: parallelism {p} of the space has no measured capacity/base latency "
                                 f"(measured: {sorted(self.capacity)})")

    def fit(self, X: np.ndarray, rates: np.ndarray, Y: np.ndarray) -> "CapacitySurrogate":
        return self  # measured, not fitted

    def _parallelism(self, x: np.ndarray) -> int:
        lo, hi = self.space.bounds()[0]
        p = lo + float(x[0]) * (hi - lo)
        return min(self.space.parallelism, key=lambda v: abs(v - p))

    def latency_ms(self, p: int, rate: float) -> float:
        u = rate / self.capacity[p]
        if u >= 0.99:
            return _OVERLOADED_MS
        return self.base_latency_ms[p] * (1.0 + 0.5 * u / (1.0 - u))

    def predict(self, X: np.ndarray, rate: float) -> SurrogatePrediction:
        X = np.atleast_2d(np.asarray(X, dtype="float64"))
        mean = np.zeros((len(X), len(self.outcomes)))
        for i, x in enumerate(X):
            p = self._parallelism(x)
            values = {
                "latency_ms": np.log(self.latency_ms(p, rate)),
                "cpu_used": rate * self.cpu_core_s_per_record,
                "memory_used_mb": self.memory_used_mb,
                "recovery_s": np.log(max(self.recovery_s, 1e-3)),
            }
            mean[i] = [values[o] for o in self.outcomes]
        std = np.full_like(mean, self.log_std)
        return SurrogatePrediction(self.outcomes, mean, std)
