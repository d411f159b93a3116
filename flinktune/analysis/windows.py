"""Per-subtask time and record matrices of one window, read from raw samples.

Use :func:`subtask_window` to turn raw-schema samples (:mod:`flinktune.metrics.schema`) into
dense arrays the bottleneck analysis works on: for each vertex, in the order vertices first
appear (topological for Flink and the twin), arrays of shape ``(seconds, subtasks)`` of busy,
backpressured and idle time as fractions of a second, and records in and out per second.

Vertex-level samples (subtask -1) count as one subtask. Seconds in which no vertex reported any
time (the job was down) are dropped: they say nothing about where the time goes.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

__all__ = ["RECORD_METRICS", "TIME_METRICS", "SubtaskWindow", "VertexWindow", "has_vertex", "subtask_window"]

TIME_METRICS = ("busyTimeMsPerSecond", "backPressuredTimeMsPerSecond", "idleTimeMsPerSecond")
RECORD_METRICS = ("numRecordsInPerSecond", "numRecordsOutPerSecond")


@dataclass(frozen=True)
class VertexWindow:
    """One vertex over the window: arrays of shape ``(seconds, subtasks)``; times in [0, 1]."""

    name: str
    subtasks: tuple[int, ...]
    busy: np.ndarray
    backpressured: np.ndarray
    idle: np.ndarray
    records_in: np.ndarray
    records_out: np.ndarray

    @property
    def parallelism(self) -> int:
        return len(self.subtasks)

    @property
    def records(self) -> np.ndarray:
        """Records handled per second: in, or out where nothing is counted in (Flink sources)."""
        return self.records_in if self.records_in.sum() > 0 else self.records_out


@dataclass(frozen=True)
class SubtaskWindow:
    """All vertices of one window; ``per_subtask`` is False when only vertex-level samples came."""

    vertices: tuple[VertexWindow, ...]
    seconds: int
    per_subtask: bool


def has_vertex(samples: pd.DataFrame) -> np.ndarray:
    """Rows of ``samples`` that name a vertex (vertex-level or subtask samples), as a plain boolean array."""
    return (samples["vertex"] != "").to_numpy(dtype=bool, na_value=True)


def subtask_window(samples: pd.DataFrame) -> SubtaskWindow | None:
    """Dense per-subtask matrices from raw samples; None when there is no per-vertex busy time."""
    metrics = TIME_METRICS + RECORD_METRICS
    df = samples[samples["metric"].isin(metrics).to_numpy() & has_vertex(samples)]
    if df.empty:
        return None
    # Integer codes of the labels (categorical columns give them without a string per row).
    v_code, v_names = pd.factorize(df["vertex"], use_na_sentinel=False)  # in the order vertices first appear
    names = [str(v) for v in v_names]
    m_first, m_names = pd.factorize(df["metric"])
    m_code = np.array([metrics.index(str(m)) for m in m_names], dtype=np.int64)[m_first]
    if not (m_code == 0).any():  # no busy time
        return None
    t_code, t_vals = pd.factorize(df["ts_ms"].to_numpy(), sort=True)
    sub = np.maximum(df["subtask"].to_numpy(dtype=np.int64), 0)
    per_subtask = bool((df["subtask"].to_numpy() >= 0).any())
    width = int(sub.max()) + 1
    cube = np.zeros((len(metrics), len(names), len(t_vals), width))
    seen = np.zeros((len(names), width), dtype=bool)
    values = np.nan_to_num(df["value"].to_numpy(dtype=np.float64), nan=0.0, posinf=0.0, neginf=0.0)
    cube[m_code, v_code, t_code, sub] = values
    seen[v_code, sub] = True
    times = cube[:3] / 1000.0
    running = times.sum(axis=(0, 1, 3)) > 0
    out = []
    for k, name in enumerate(names):
        cols = np.flatnonzero(seen[k])
        pick = lambda m: cube[m, k][running][:, cols]  # noqa: E731, B023 - used within this iteration only
        out.append(
            VertexWindow(
                name,
                tuple(int(c) for c in cols),
                np.clip(pick(0) / 1000.0, 0, 1),
                np.clip(pick(1) / 1000.0, 0, 1),
                np.clip(pick(2) / 1000.0, 0, 1),
                pick(3),
                pick(4),
            )
        )
    return SubtaskWindow(tuple(out), int(running.sum()), per_subtask)
