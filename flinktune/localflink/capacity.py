"""Measured capacity models of the local job: the policy's ``Surrogate`` and its capacity memory.

Use :class:`CapacitySurrogate` when the policy must decide for the local cluster from a handful
of profiling runs (too few for Gaussian processes over four outcomes): each parallelism has a
capacity measured on this machine (records/s the job sustains, from a ramp to saturation:
:mod:`flinktune.localflink.saturation`; build it with :meth:`CapacitySurrogate.from_estimates`),
a base latency and a measured recovery time. Latency at utilisation u grows as
``base * (1 + 0.5 u / (1 - u))`` (queueing) and is effectively unbounded at u >= 1 (the backlog
grows). Predictions follow :class:`models.surrogate.types.SurrogatePrediction` (log space for
latency and recovery) with a fixed log-std reflecting run-to-run noise on a shared 2-core box.

Use :class:`ProfiledCapacity` as the flinktune policy's capacity model of the local job's shape
(``FlinktunePolicy(capacities=ShapeCapacities(models={shape: profiled}))``): the policy's own
DS2-style measurement (busy-time extrapolation in every steady window) over-predicts at low load
on 2 cores, so a saturation-profiled capacity caps it; it also tells the profiling gate which
parallelisms have a trustworthy capacity. Until the policy's first steady window the shape
counts as unmeasured and the policy sizes by its surrogate, which
:meth:`CapacitySurrogate.from_estimates` builds from the same profiled capacities.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

import numpy as np

from flinktune.config_space import ConfigSpace
from flinktune.localflink.saturation import CapacityEstimate
from flinktune.tuner.capacity import CapacityModel
from models.surrogate.types import OUTCOMES, SurrogatePrediction

__all__ = ["CapacitySurrogate", "ProfiledCapacity"]

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
                raise ValueError(
                    f"capacity model: parallelism {p} of the space has no measured capacity/base latency "
                    f"(measured: {sorted(self.capacity)})"
                )

    @classmethod
    def from_estimates(
        cls,
        space: ConfigSpace,
        estimates: Iterable[CapacityEstimate],
        *,
        recovery_s: float,
        cpu_core_s_per_record: float,
        memory_used_mb: float,
        default_base_latency_ms: float = 500.0,
    ) -> CapacitySurrogate:
        """A surrogate from trusted ramp estimates (one per parallelism of ``space``).

        A ramp whose lowest step fell behind has no base latency: ``default_base_latency_ms`` stands in.
        """
        trusted = {e.parallelism: e for e in estimates if e.trusted}
        base = {p: (e.base_latency_ms if np.isfinite(e.base_latency_ms) else default_base_latency_ms) for p, e in trusted.items()}
        return cls(space, {p: e.capacity for p, e in trusted.items()}, base, recovery_s, cpu_core_s_per_record, memory_used_mb)

    def fit(self, X: np.ndarray, rates: np.ndarray, Y: np.ndarray) -> CapacitySurrogate:
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


@dataclass
class ProfiledCapacity(CapacityModel):
    """A :class:`CapacityModel` whose estimates never exceed a saturation-profiled capacity.

    ``profiled`` holds trusted ramp estimates by parallelism (:meth:`record`). Per parallelism
    the estimate is the lower of the profiled capacity and the policy's own smoothed window
    measurements (a neighbour taking CPU lowers it; a busy-time extrapolation at low load cannot
    raise it); a parallelism with neither is extrapolated from the nearest known one as
    :class:`CapacityModel` does. :meth:`reset` forgets only the window measurements. One object
    serves one shape (the local loop runs one): :meth:`record` refuses an estimate of another.
    """

    profiled: dict[int, CapacityEstimate] = field(default_factory=dict)

    def record(self, estimate: CapacityEstimate) -> None:
        """Keep a trusted ramp estimate (an untrusted one is ignored: it is only a lower bound)."""
        if not estimate.trusted:
            return
        shape = {k: v for k, v in estimate.config.items() if k != "parallelism"}
        for other in self.profiled.values():
            theirs = {k: v for k, v in other.config.items() if k != "parallelism"}
            if shape and theirs and shape != theirs:
                raise ValueError(
                    f"profiled capacity for p={estimate.parallelism} is of shape {shape}, but the model holds "
                    f"shape {theirs}: one ProfiledCapacity per shape"
                )
        self.profiled[estimate.parallelism] = estimate

    def trusted(self, parallelism: int) -> bool:
        return parallelism in self.profiled

    def _known(self) -> dict[int, float]:
        known = {p: e.capacity for p, e in self.profiled.items()}
        for p, c in self.measured.items():
            known[p] = min(known[p], c) if p in known else c
        return known

    def estimate(self, parallelism: int) -> float | None:
        known = self._known()
        if not known:
            return None
        if parallelism in known:
            return known[parallelism]
        ref = min(known, key=lambda p: (abs(p - parallelism), -p))
        ratio = parallelism / ref
        return known[ref] * (ratio**self.up_exponent if ratio > 1 else ratio)
