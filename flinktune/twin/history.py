"""The twin's per-second history: one row per simulated second, in memory and on disk.

Use :func:`history_chunk` to summarise one ``TwinJob.run`` (what it consumed, produced, used and
ran with), :func:`history_frame` to join the chunks into ``TwinJob.history()``'s frame, and the
``*_json`` / ``*_parquet`` pairs to persist them: inside the JSON state
(``state_dict(with_history=True)``) or beside it, as ``<state>.history.parquet`` (``save``/``load``).
Emitted metrics are not kept here (:mod:`flinktune.twin.metric_series` builds those).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from flinktune.config_space import Configuration
from flinktune.lake.atomic import atomic_parquet
from flinktune.twin.engine import StepOutputs

__all__ = [
    "HISTORY_COLUMNS",
    "HistoryChunk",
    "chunks_from_json",
    "chunks_to_json",
    "history_chunk",
    "history_frame",
    "history_parquet_path",
    "read_history_parquet",
    "write_history_parquet",
]

HISTORY_COLUMNS: tuple[str, ...] = (
    "ts",
    "rate",
    "throughput",
    "lag",
    "latency_p50_ms",
    "latency_p95_ms",
    "latency_p99_ms",
    "cpu_used",
    "memory_used_mb",
    "running",
    "taskmanagers",
    "total_cpu",
    "total_memory_mb",
    "parallelism",
    "task_slots",
    "cpu",
    "memory_mb",
    "checkpoint_interval_s",
    "capacity",
    "restarts",
    "checkpoint_duration_ms",
    "checkpoint_size_bytes",
)

#: One run's history: an array per :data:`HISTORY_COLUMNS` entry (``ts``: int64 epoch seconds).
HistoryChunk = dict[str, np.ndarray]


def history_chunk(
    cfg: Configuration,
    ts: np.ndarray,
    rates: np.ndarray,
    capacity: np.ndarray,
    out: StepOutputs,
    latency: tuple[np.ndarray, np.ndarray, np.ndarray],
    cpu_used: np.ndarray,
    memory_used_mb: np.ndarray,
) -> HistoryChunk:
    """The history of seconds ``ts`` run under ``cfg`` (``latency``: p50, p95, p99 in ms)."""
    n = rates.size
    p50, p95, p99 = latency
    return {
        "ts": ts,
        "rate": rates,
        "throughput": out.throughput,
        "lag": out.lag,
        "latency_p50_ms": p50,
        "latency_p95_ms": p95,
        "latency_p99_ms": p99,
        "cpu_used": cpu_used,
        "memory_used_mb": memory_used_mb,
        "running": out.running,
        "taskmanagers": np.full(n, cfg.taskmanagers, float),
        "total_cpu": np.full(n, cfg.total_cpu, float),
        "total_memory_mb": np.full(n, cfg.total_memory_mb, float),
        "parallelism": np.full(n, cfg.parallelism, float),
        "task_slots": np.full(n, cfg.task_slots, float),
        "cpu": np.full(n, cfg.cpu, float),
        "memory_mb": np.full(n, cfg.memory_mb, float),
        "checkpoint_interval_s": np.full(n, cfg.checkpoint_interval_s, float),
        "capacity": capacity,
        "restarts": out.restarts,
        "checkpoint_duration_ms": out.ckpt_duration_ms,
        "checkpoint_size_bytes": out.ckpt_size_bytes,
    }


def history_frame(chunks: list[HistoryChunk]) -> pd.DataFrame:
    """The chunks as one frame (:data:`HISTORY_COLUMNS`; ``ts`` is UTC); typed but empty for none."""
    if not chunks:
        return pd.DataFrame({c: pd.Series(dtype=float) for c in HISTORY_COLUMNS}).assign(
            ts=pd.Series(dtype="datetime64[ns, UTC]")
        )
    cols = {c: np.concatenate([h[c] for h in chunks]) for c in HISTORY_COLUMNS}
    df = pd.DataFrame(cols, columns=list(HISTORY_COLUMNS))
    df["ts"] = pd.to_datetime(df["ts"], unit="s", utc=True)
    return df


def chunks_to_json(chunks: list[HistoryChunk]) -> list[dict[str, Any]]:
    """The chunks as plain lists (for the JSON state); :func:`chunks_from_json` reads them back."""
    return [{k: v.tolist() for k, v in h.items()} for h in chunks]


def chunks_from_json(items: list[dict[str, Any]]) -> list[HistoryChunk]:
    return [{k: np.asarray(v, dtype=np.int64 if k == "ts" else float) for k, v in h.items()} for h in items]


def history_parquet_path(state_path: Path) -> Path:
    """Where the history of the twin saved at ``state_path`` goes: ``<state_path>.history.parquet``."""
    return state_path.with_name(state_path.name + ".history.parquet")


def write_history_parquet(chunks: list[HistoryChunk], state_path: Path) -> None:
    """Write the history beside ``state_path`` atomically (``ts`` as epoch seconds); nothing for none."""
    if not chunks:
        return
    h = history_frame(chunks)
    h["ts"] = h["ts"].astype("int64") // 10**9
    atomic_parquet(h, history_parquet_path(state_path))


def read_history_parquet(state_path: Path) -> list[HistoryChunk] | None:
    """The history saved beside ``state_path`` as one chunk; None when there is no such file."""
    path = history_parquet_path(state_path)
    if not path.exists():
        return None
    h = pd.read_parquet(path)
    return [{c: h[c].to_numpy(dtype=np.int64 if c == "ts" else float) for c in HISTORY_COLUMNS}]
