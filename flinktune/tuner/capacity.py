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

:class:`ShapeCapacities` keeps one :class:`CapacityModel` per shape (a return to a shape starts
from what it measured there) and estimates shapes never run from the shape measured last, by
cores per slot: a slot runs one subtask of every vertex, CPU-bound threads sharing the slot's
cores, so up to one core per slot the capacity at a parallelism is proportional to the cores per
slot (Flink's thread-per-slot model; above one core per slot the gain depends on how many threads
can run at once, so no estimate is made there). The transfer ignores memory: a policy checks
memory per slot separately. It is a prior for ranking shapes; the new shape is measured within
one window of running it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from flinktune.decision import JobState
from flinktune.decision.reconfig import Shape, shape_of  # the one in-place rule's shape (re-exported)

__all__ = ["CapacityModel", "Shape", "ShapeCapacities", "measured_capacity", "shape_from_json", "shape_of", "slot_share"]


def slot_share(shape: Shape) -> float:
    """Cores per slot of ``shape`` (TaskManager CPU / task slots)."""
    return float(shape[1]) / float(shape[0])


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


@dataclass
class ShapeCapacities:
    """Measured capacity per shape plus estimates, by cores per slot, for shapes not measured.

    Use :meth:`observe` with each steady window of the running shape and :meth:`estimate` for any
    (shape, parallelism); ``last`` is the shape measured most recently (the transfer source).
    """

    up_exponent: float = 0.85
    smoothing: float = 0.5
    models: dict[Shape, CapacityModel] = field(default_factory=dict)
    last: Shape | None = None

    def model(self, shape: Shape) -> CapacityModel:
        """The capacity model of ``shape`` (created empty on first use)."""
        if shape not in self.models:
            self.models[shape] = CapacityModel(self.up_exponent, self.smoothing)
        return self.models[shape]

    def observe(self, shape: Shape, parallelism: int, capacity: float) -> None:
        """Fold one steady window of ``shape`` at ``parallelism`` in (job input rec/s)."""
        if not np.isfinite(capacity) or capacity <= 0:
            raise ValueError(f"capacity of {shape} at p{parallelism} must be a positive rate, got {capacity!r}")
        self.model(shape).observe(parallelism, capacity)
        self.last = shape

    def measured(self, shape: Shape) -> bool:
        """Whether ``shape`` itself has been measured (not only estimated)."""
        return bool(self.models.get(shape) and self.models[shape].measured)

    def estimate(self, shape: Shape, parallelism: int) -> float | None:
        """Capacity of ``shape`` at ``parallelism``: measured (and extrapolated in parallelism) when
        the shape ran, else transferred from ``last`` by cores per slot when both have at most one
        core per slot, else None."""
        if self.measured(shape):
            return self.models[shape].estimate(parallelism)
        src = self.last
        if src is None or not self.measured(src):
            return None
        share, src_share = slot_share(shape), slot_share(src)
        if share > 1.0 + 1e-9 or src_share > 1.0 + 1e-9:
            return None
        base = self.models[src].estimate(parallelism)
        return None if base is None else base * share / src_share

    def to_dict(self) -> dict:
        """The measurements as JSON (shapes as lists, parallelism keys as strings); see :meth:`restore`."""
        return {
            "models": [
                {"shape": list(shape), "measured": {str(p): float(c) for p, c in m.measured.items()}}
                for shape, m in self.models.items()
                if m.measured
            ],
            "last": list(self.last) if self.last is not None else None,
        }

    def restore(self, d: dict) -> ShapeCapacities:
        """Take back the measurements of :meth:`to_dict` (this object's smoothing and exponent stay)."""
        for entry in d.get("models", []):
            model = self.model(shape_from_json(entry["shape"]))
            model.measured = {int(p): float(c) for p, c in entry["measured"].items()}
        self.last = shape_from_json(d["last"]) if d.get("last") is not None else None
        return self


def shape_from_json(values: list) -> Shape:
    slots, cpu, memory_mb, checkpoint_s = values
    return (int(slots), float(cpu), int(memory_mb), int(checkpoint_s))
