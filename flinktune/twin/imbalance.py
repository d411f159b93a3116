"""Planted imbalance for the twin: a hot key on a keyed vertex and a slow TaskManager.

Use :class:`Imbalance` with ``TwinJob(..., imbalance=Imbalance(...))`` when a test or a what-if
needs a job whose subtasks are not alike, so that the bottleneck analysis
(:mod:`flinktune.analysis`) has something to find. Everything is off by default and a twin built
without an imbalance behaves exactly as before (same seed, same output).

Model (an approximation, per subtask, on top of :func:`flinktune.twin.mechanics.layout`):

- **Hot key**: a share ``hot_key_share`` of the records entering the keyed (``hash``) vertex
  ``hot_vertex`` carries one key, so they all go to one subtask (``hot_subtask`` modulo the
  vertex's parallelism); the other records spread evenly. The hot subtask gets
  ``h + (1 - h) / p`` of the records, which tends to ``h`` (not 0) as parallelism grows: more
  parallelism does not remove skew.
- **Slow TaskManager**: the subtasks in the slots of TaskManager ``slow_taskmanager`` (subtask
  ``j`` runs in slot ``j``, TaskManager ``j // task_slots``, as slot sharing lays them out) run
  at ``slow_speed`` of normal speed (a noisy neighbour, a throttled node). It has no effect when
  the configuration has fewer TaskManagers.
- Busy time of each thread is proportional to the CPU time it needs per job input record
  (its work / its speed), as in the balanced layout; the slowest thread is busy all the time at
  saturation and sets the pace: the balanced capacity is divided by :attr:`SubtaskLoads.slowdown`
  (the slowest thread's need over the balanced heaviest thread's, at least 1). The extra load a
  hot subtask puts on its slot's shared cores is not modelled.
- ``metric_noise``: log-normal noise (sigma) on per-subtask busy time, seeded per second and
  subtask, so tests see measurement noise as a real metrics pipeline would.

Limits: the analytic steady state, the oracle and profiling ignore the imbalance (they model a
balanced job); records of forward and rebalance vertices stay evenly spread; a slow subtask
slows only its own thread (no effect on colocated JVM neighbours beyond its slot's cores).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from typing import Any

import numpy as np

from flinktune.twin.dataflow import DataflowSpec

__all__ = ["Imbalance", "ImbalanceError", "SubtaskLoads", "subtask_loads"]


class ImbalanceError(ValueError):
    """An imbalance does not fit the job; the message names the field and what is allowed."""


@dataclass(frozen=True)
class Imbalance:
    """A hot key and/or a slow TaskManager planted in the twin (all off by default)."""

    hot_vertex: str | None = None
    hot_key_share: float = 0.0
    hot_subtask: int = 0
    slow_taskmanager: int | None = None
    slow_speed: float = 1.0
    metric_noise: float = 0.0

    def __post_init__(self) -> None:
        if not 0.0 <= self.hot_key_share < 1.0:
            raise ImbalanceError(f"imbalance hot_key_share must be in [0, 1), got {self.hot_key_share!r}")
        if self.hot_key_share > 0 and not self.hot_vertex:
            raise ImbalanceError("imbalance hot_key_share > 0 needs hot_vertex (the keyed vertex that gets the hot key)")
        if self.hot_subtask < 0:
            raise ImbalanceError(f"imbalance hot_subtask must be >= 0, got {self.hot_subtask!r}")
        if not 0.0 < self.slow_speed <= 1.0:
            raise ImbalanceError(f"imbalance slow_speed must be in (0, 1], got {self.slow_speed!r}")
        if self.slow_taskmanager is not None and self.slow_taskmanager < 0:
            raise ImbalanceError(f"imbalance slow_taskmanager must be >= 0, got {self.slow_taskmanager!r}")
        if self.metric_noise < 0:
            raise ImbalanceError(f"imbalance metric_noise must be >= 0, got {self.metric_noise!r}")

    @property
    def active(self) -> bool:
        """True when anything is planted (a twin with an inactive imbalance runs the balanced model)."""
        skew = self.hot_vertex is not None and self.hot_key_share > 0
        slow = self.slow_taskmanager is not None and self.slow_speed < 1.0
        return skew or slow or self.metric_noise > 0

    def check(self, flow: DataflowSpec) -> None:
        """Raise :class:`ImbalanceError` when ``hot_vertex`` is not a keyed (hash) vertex of ``flow``."""
        if self.hot_vertex is None:
            return
        keyed = [v.name for v in flow.vertices if v.partitioning == "hash"]
        if self.hot_vertex not in keyed:
            raise ImbalanceError(
                f"imbalance hot_vertex {self.hot_vertex!r} is not a keyed (hash) vertex of job {flow.name!r}; keyed vertices: {keyed}"
            )

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any], where: str = "imbalance") -> Imbalance:
        names = {f.name for f in fields(cls)}
        unknown = sorted(set(d) - names)
        if unknown:
            raise ImbalanceError(f"{where}: unknown key(s) {unknown}; allowed: {sorted(names)}")
        return cls(**d)


@dataclass(frozen=True)
class SubtaskLoads:
    """Per vertex, per subtask: record shares, speeds and loads (lists of arrays, one per vertex).

    ``records[v][j]``: share of vertex ``v``'s records that subtask ``j`` receives (sums to 1);
    ``ratio[v][j]``: the thread's busy fraction relative to the slowest thread's; ``bottleneck``:
    (vertex index, subtask) of the slowest thread; ``slowdown``: capacity of the balanced job
    divided by this one's (>= 1 when something is planted).
    """

    records: list[np.ndarray]
    ratio: list[np.ndarray]
    bottleneck: tuple[int, int]
    slowdown: float


def subtask_loads(
    imb: Imbalance, vertices: tuple[str, ...], parallelism: np.ndarray, a: np.ndarray, task_slots: int
) -> SubtaskLoads:
    """Per-subtask loads of a layout (``a``: per-subtask core-s per job rec/s, balanced) under ``imb``."""
    records, work, speed, uniform_work = [], [], [], []
    for name, p, a_v in zip(vertices, parallelism.astype(int), a):
        share = np.full(p, 1.0 / p)
        if name == imb.hot_vertex and imb.hot_key_share > 0:
            share = np.full(p, (1.0 - imb.hot_key_share) / p)
            share[imb.hot_subtask % p] += imb.hot_key_share
        s = np.ones(p)
        if imb.slow_taskmanager is not None:
            s[np.arange(p) // task_slots == imb.slow_taskmanager] = imb.slow_speed
        records.append(share)
        work.append(a_v * p * share)
        speed.append(s)
        uniform_work.append(np.full(p, a_v))
    # Busy time follows each thread's own CPU need per record (as the layout's ratio does) and
    # the slowest thread sets the pace, so capacity scales by the ratio of the heaviest needs.
    need = [w / s for w, s in zip(work, speed)]
    top = max(float(x.max()) for x in need)
    v = int(np.argmax([x.max() for x in need]))
    return SubtaskLoads(
        records=records,
        ratio=[x / top for x in need],
        bottleneck=(v, int(np.argmax(need[v]))),
        slowdown=max(top / max(float(x.max()) for x in uniform_work), 1.0),
    )
