"""Measured job capacity per parallelism, DS2-style, for parallelism-only (in-place) scaling.

Use :class:`CapacityModel` inside a policy that keeps a job's shape (slots, CPU and memory per
TaskManager, checkpoint interval) fixed and moves only the parallelism. Every steady window
(no failure, job running, some load) gives one measurement of the job's capacity at the running
parallelism: the input rate the sources could sustain if the busiest vertex were never idle,
i.e. DS2's true processing rate of each vertex mapped back to job input records
(``vertex true rate x job input / vertex input``), the minimum over vertices. Estimates for a
parallelism never run are extrapolated from the nearest measured one, sub-linearly when scaling
up (``up_exponent`` < 1: shuffles and coordination cost more with more subtasks) and linearly
when scaling down (which under-estimates, the safe side). Measurements are per shape, so a
change of shape starts from scratch.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from flinktune.config_space import Configuration
from flinktune.decision import JobState

__all__ = ["CapacityModel", "Shape", "shape_of", "measured_capacity"]

#: (task_slots, cpu, memory_mb, checkpoint_interval_s): what an in-place rescale keeps.
Shape = tuple[int, float, int, int]


def shape_of(cfg: Configuration) -> Shape:
    """The knobs an in-place rescale cannot change."""
    return (cfg.task_slots, cfg.cpu, cfg.memory_mb, cfg.checkpoint_interval_s)


def measured_capacity(state: JobState, min_busy: float = 0.05) -> float | None:
    """The job's capacity (job input rec/s) in this window from true processing rates, or None.

    None when the window is not steady enough to trust: a failure in it, the job not running,
    no per-vertex metrics, or the busiest vertex under ``min_busy`` busy (too idle to measure).
    """
    if state.restarts > 0 or not state.running or state.problems or not state.vertices:
        return None
    source_in = state.vertices[0].records_in_per_s or state.vertices[0].records_out_per_s
    if not np.isfinite(source_in) or source_in <= 0:
        return None
    caps = []
    for v in state.vertices:
        if not np.isfinite(v.true_processing_rate) or v.records_in_per_s <= 0 or v.busy_ratio < min_busy:
            continue
        caps.append(v.true_processing_rate * source_in / v.records_in_per_s)
    if not caps:
        return None
    # The source vertex reads from outside: its "records in" are its reads, i.e. the job input.
    return float(min(caps))


@dataclass
class CapacityModel:
    """Capacity by parallelism for one shape: exponentially averaged measurements + extrapolation."""

    up_exponent: float = 0.85
    smoothing: float = 0.5
    measured: dict[int, float] = field(default_factory=dict)

    def observe(self, parallelism: int, capacity: float) -> None:
        """Fold in one window's measured capacity at ``parallelism`` (rec/s)."""
        old = self.measured.get(parallelism)
        self.measured[parallelism] = capacity if old is None else (1 - self.smoothing) * old + self.smoothing * capacity

    def estimate(self, parallelism: int) -> float | None:
        """Estimated capacity at ``parallelism`` (None before any measurement)."""
        if not self.measured:
            return None
        if parallelism in self.measured:
            return self.measured[parallelism]
        ref = min(self.measured, key=lambda p: (abs(p - parallelism), -p))
        ratio = parallelism / ref
        return self.measured[ref] * (ratio**self.up_exponent if ratio > 1 else ratio)

    def reset(self) -> None:
        self.measured.clear()
