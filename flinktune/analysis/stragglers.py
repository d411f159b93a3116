"""Stragglers: a subtask far busier than its siblings, and why (a hot key or a slow host).

Use :func:`find_stragglers` on a :class:`~flinktune.analysis.windows.SubtaskWindow` with
per-subtask samples. Within each vertex of parallelism >= 2, a subtask is a straggler when its
mean busy time is at least ``busy_ratio`` times its siblings' median (and at least
``min_busy``). Its cause is read from two ratios to the siblings' medians:

- records ratio (records it handled): high means **key skew**, the hash partitioner sends it
  more records; more parallelism does not help (the hot key stays on one subtask);
- cost ratio (busy time per record): high with ordinary records means a **slow worker** (the
  host, a noisy neighbour, GC on that TaskManager); moving the work off it helps, scaling only
  partly. Subtask ``j`` is placed on TaskManager ``j // task_slots`` (slot sharing's default
  layout; Flink does not guarantee it, the REST API's per-subtask host is the truth).

Limits: a straggler that is capped at 100 % busy understates its cost ratio; with parallelism 2
the median is the mean of both, so ratios are damped.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from flinktune.analysis.windows import SubtaskWindow

__all__ = ["KEY_SKEW", "SLOW_WORKER", "UNKNOWN", "Straggler", "find_stragglers", "slow_workers"]

KEY_SKEW = "key skew"
SLOW_WORKER = "slow worker"
UNKNOWN = "unexplained"


@dataclass(frozen=True)
class Straggler:
    """A subtask far busier than its siblings; ratios are to the siblings' medians."""

    vertex: str
    subtask: int
    worker: int | None
    busy: float
    busy_ratio: float
    records_ratio: float
    cost_ratio: float
    cause: str
    score: float = 0.0

    def label(self) -> str:
        return f"{self.vertex}[{self.subtask}]"

    def to_dict(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in self.__dataclass_fields__}


def _ratios(
    window: SubtaskWindow, min_busy: float
) -> list[tuple[str, np.ndarray, np.ndarray, np.ndarray, np.ndarray, tuple[int, ...]]]:
    out = []
    for v in window.vertices:
        if v.parallelism < 2:
            continue
        busy = v.busy.mean(axis=0)
        rec = v.records.mean(axis=0)
        with np.errstate(divide="ignore", invalid="ignore"):
            cost = np.where(rec > 0, busy / rec, np.nan)
            busy_r = busy / max(float(np.median(busy)), 1e-9)
            rec_r = rec / float(np.median(rec)) if np.median(rec) > 0 else np.ones_like(rec)
            cost_r = (
                cost / float(np.nanmedian(cost)) if np.isfinite(cost).any() and np.nanmedian(cost) > 0 else np.ones_like(cost)
            )
        out.append((v.name, busy, busy_r, np.nan_to_num(rec_r, nan=1.0), np.nan_to_num(cost_r, nan=1.0), v.subtasks))
    return out


def find_stragglers(
    window: SubtaskWindow,
    scores: dict[tuple[str, int], float],
    *,
    task_slots: int | None,
    busy_ratio: float = 1.5,
    cause_ratio: float = 1.3,
    min_busy: float = 0.1,
) -> tuple[Straggler, ...]:
    """Stragglers ordered by critical participation (``scores`` per (vertex, subtask)), highest first."""
    if not window.per_subtask:
        return ()
    found = []
    for name, busy, busy_r, rec_r, cost_r, subs in _ratios(window, min_busy):
        for i, j in enumerate(subs):
            if busy[i] < min_busy or busy_r[i] < busy_ratio:
                continue
            if rec_r[i] >= cause_ratio and rec_r[i] >= cost_r[i]:
                cause = KEY_SKEW
            elif cost_r[i] >= cause_ratio:
                cause = SLOW_WORKER
            else:
                cause = UNKNOWN
            worker = j // task_slots if task_slots else None
            found.append(
                Straggler(
                    name,
                    j,
                    worker,
                    float(busy[i]),
                    float(busy_r[i]),
                    float(rec_r[i]),
                    float(cost_r[i]),
                    cause,
                    float(scores.get((name, j), 0.0)),
                )
            )
    return tuple(sorted(found, key=lambda s: (-s.score, -s.busy_ratio)))


def slow_workers(
    window: SubtaskWindow,
    worker_scores: dict[int, float],
    *,
    task_slots: int | None,
    cause_ratio: float = 1.3,
    min_busy: float = 0.05,
) -> tuple[int, ...]:
    """TaskManagers whose subtasks need ``cause_ratio`` times their siblings' time per record (median over the
    TaskManager's busy subtasks), ordered by critical participation."""
    if not window.per_subtask or not task_slots:
        return ()
    per_worker: dict[int, list[float]] = {}
    for _name, busy, _busy_r, _rec_r, cost_r, subs in _ratios(window, min_busy):
        for i, j in enumerate(subs):
            if busy[i] >= min_busy:
                per_worker.setdefault(j // task_slots, []).append(float(cost_r[i]))
    slow = [w for w, r in per_worker.items() if float(np.median(r)) >= cause_ratio]
    return tuple(sorted(slow, key=lambda w: -worker_scores.get(w, 0.0)))
