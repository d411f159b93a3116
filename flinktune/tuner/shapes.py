"""The shapes the flinktune policy chooses among, and the configurations it profiles at start-up.

Use :func:`shape_candidates` for the candidates whose TaskManagers give each slot one of
:data:`SLOT_CORES` cores and enough memory (:func:`slot_memory_mb`), :func:`shape_configs` for
the in-place parallelism steps of one shape, and :func:`startup_design` for the few configurations
profiled before the first shape choice. :class:`SizedShape` is one shape sized for a rate, as
:func:`flinktune.tuner.shape_choice.rank_shapes` returns them.

Why these shapes: fractions of a core are fully used by a slot's CPU-bound threads, so they lower
the floor at low load (p8 x 0.5 core = 4 cores, not 8) and make the cost steps finer; whole cores
per slot are the cheapest at high load (lower parallelism, less shuffle and coordination per record).
"""

from __future__ import annotations

from dataclasses import dataclass

from flinktune.config_space import ConfigSpace, Configuration, spread_design
from flinktune.tuner.capacity import Shape, slot_share

__all__ = ["SLOT_CORES", "TM_OVERHEAD_MB", "SizedShape", "shape_candidates", "shape_configs", "slot_memory_mb", "startup_design"]

#: TaskManager memory no slot can use with Flink's defaults: JVM metaspace 256 MB, framework
#: off-heap 128 MB, and JVM overhead (10%, at least 192 MB), about 576 MB per TaskManager.
TM_OVERHEAD_MB = 576.0

#: Cores per slot the policy's shapes may give: fractions of a core are fully used by a slot's
#: CPU-bound threads and make the cost steps finer and the low-load floor lower (p8 x 0.5 core =
#: 4 cores instead of 8); more than one core per slot is worth less per core.
SLOT_CORES: tuple[float, ...] = (0.5, 0.75, 1.0)


def slot_memory_mb(cfg: Configuration) -> float:
    """Memory each slot of ``cfg`` gets once the TaskManager's fixed overhead is set aside, MB."""
    return (cfg.memory_mb - TM_OVERHEAD_MB) / cfg.task_slots


def shape_candidates(
    space: ConfigSpace, slot_cores: tuple[float, ...] | None = (1.0,), min_slot_memory_mb: float = 0.0
) -> list[Configuration]:
    """The candidates of ``space`` whose TaskManagers give each slot one of ``slot_cores`` cores.

    Flink's guidance is one slot per core: a slot runs one thread per vertex, so a fraction of a
    core throttles every subtask and cores beyond one per slot mostly idle. Restricting shapes to
    that (``slot_cores=(1.0,)``) leaves the models far fewer shapes to tell apart, and every
    parallelism step then costs the same few cores. ``None`` keeps every CPU share. Slots with
    less than ``min_slot_memory_mb`` each (:func:`slot_memory_mb`: a small TaskManager loses most of
    its memory to the fixed overhead) are left out too.
    """
    out = []
    for c in space.candidates():
        share = c.cpu / c.task_slots
        if slot_cores is not None and not any(abs(share - k) < 1e-9 for k in slot_cores):
            continue
        if slot_memory_mb(c) >= min_slot_memory_mb:
            out.append(c)
    return out


def shape_configs(space: ConfigSpace, shape: Shape) -> list[Configuration]:
    """The configurations of ``space`` with ``shape``, smallest parallelism first (the in-place steps)."""
    slots, cpu, mem, ckpt = shape
    out = [Configuration(p, slots, cpu, mem, ckpt) for p in space.parallelism if p % slots == 0]
    return [c for c in out if space.contains(c)]


def startup_design(
    space: ConfigSpace, n: int, seed: int, slot_cores: tuple[float, ...] | None = SLOT_CORES, min_slot_memory_mb: float = 512.0
) -> list[Configuration]:
    """``n`` configurations to profile before the first shape choice: spread over :func:`shape_candidates`.

    Greedy max-min distance on normalised knobs, starting from the largest-parallelism candidate
    with the least memory (it bounds the capacity the shapes can grow to), seeded for ties.
    """
    if n < 1:
        raise ValueError(f"startup design size must be >= 1, got {n}")
    cands = shape_candidates(space, slot_cores, min_slot_memory_mb)
    if not cands:
        raise ValueError(
            f"startup design: no candidate of the space has {slot_cores} cores and >= {min_slot_memory_mb} MB per slot"
        )

    def largest_leanest(cs: list[Configuration]) -> int:
        return min(range(len(cs)), key=lambda i: (-cs[i].parallelism, cs[i].total_memory_mb, cs[i].task_slots))

    return spread_design(space, cands, n, seed, largest_leanest)


@dataclass(frozen=True)
class SizedShape:
    """A shape sized for one rate: the smallest in-shape ``config`` with ``rate <= utilization x
    capacity``, its estimated ``capacity`` (rec/s), its relative ``cost`` (static max = 2.0), the
    surrogate's ``p_goals`` there, whether it can ``grow`` in place to ``growth`` x the rate, and
    whether its capacity was ``measured`` on this shape (else transferred by cores per slot)."""

    shape: Shape
    config: Configuration
    capacity: float
    cost: float
    p_goals: float
    grows: bool
    measured: bool

    def describe(self) -> str:
        src = "measured" if self.measured else "estimated from the measured shape by cores per slot"
        return (
            f"{self.config.describe()} ({slot_share(self.shape):g} core per slot): capacity {self.capacity:,.0f} rec/s {src}, "
            f"cost {self.cost:.2f} of 2.00, P(goals)={self.p_goals:.2f}"
        )
