"""Parallelism arithmetic shared by the rate-based policies (ds2, autoscaler, reactive, barre).

Use :func:`snap_parallelism` to turn a wished-for parallelism into one the configuration space
offers (the smallest grid value at least as large, compatible with the slots per TaskManager),
and :func:`vertex_targets` to spread a job's target input rate over its vertices with the
selectivities the vertices showed (DS2's propagation of target rates along the dataflow).
"""

from __future__ import annotations

import math

from flinktune.config_space import ConfigSpace
from flinktune.decision import VertexMetrics

__all__ = ["ceil_div", "grid_step", "snap_parallelism", "vertex_targets"]


def snap_parallelism(space: ConfigSpace, wanted: float, slots: int = 1) -> int:
    """Smallest grid parallelism >= ``wanted`` divisible by ``slots`` (the largest when none is)."""
    ok = [p for p in space.parallelism if p % slots == 0] or list(space.parallelism)
    for p in ok:
        if p >= wanted - 1e-9:
            return p
    return ok[-1]


def grid_step(values: tuple, current: float, steps: int) -> float:
    """The grid value ``steps`` positions from ``current`` (clamped to the ends)."""
    vals = list(values)
    i = min(range(len(vals)), key=lambda k: abs(vals[k] - current))
    return vals[max(0, min(len(vals) - 1, i + steps))]


def vertex_targets(vertices: tuple[VertexMetrics, ...], source_rate: float) -> list[float]:
    """Target input rate of each vertex when the source must read ``source_rate`` rec/s.

    Each vertex receives the source's rate times the ratio of records it saw to records the
    source read (the product of upstream selectivities on a chain).
    """
    if not vertices:
        return []
    src = vertices[0].records_in_per_s
    if src <= 0:
        return [source_rate for _ in vertices]
    return [source_rate * v.records_in_per_s / src for v in vertices]


def ceil_div(a: float, b: float) -> int:
    """ceil(a / b), at least 1 (1 when b is not positive)."""
    return max(1, math.ceil(a / b - 1e-9)) if b > 0 else 1
