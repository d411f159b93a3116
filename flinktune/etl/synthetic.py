"""Synthetic raw metric samples in the raw schema, for ETL tests and the ETL benchmark.

Use :func:`synthetic_raw` to get a plausible, seeded frame of one job's samples at 1 s: every
job-level metric once per second and the subtask metrics (records in/out, busy, back-pressured,
idle time) for ``vertices x subtasks``. It is not the twin (no queueing model); it only has the
shape and value ranges real sources produce, so the ETL has realistic volume and cardinality.
Rows per second: ``18 + 5 * vertices * subtasks`` (498 with 4 vertices x 24 subtasks).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from flinktune.metrics.schema import METRICS, RAW_DTYPES

__all__ = ["JOB_METRICS", "SUBTASK_METRICS", "synthetic_raw"]

SUBTASK_METRICS = tuple(m for m, i in METRICS.items() if i.level == "subtask")
JOB_METRICS = tuple(m for m, i in METRICS.items() if i.level == "job")


def _job_values(n: int, t: np.ndarray, rng: np.random.Generator) -> dict[str, np.ndarray]:
    rate = 50_000 + 20_000 * np.sin(2 * np.pi * t / 3600.0) + rng.normal(0, 500, n)
    rate = np.clip(rate, 0, None)
    lag = np.abs(np.cumsum(rng.normal(0, 50, n)))
    lat = np.clip(rng.lognormal(3, 0.3, n), 0, None)
    return {
        "workloadRate": rate,
        "pendingRecords": lag,
        "latencyP50Ms": lat,
        "latencyP95Ms": lat * 2.5,
        "latencyP99Ms": lat * 4.0,
        "cpuLoad": np.clip(rate / 20_000 + rng.normal(0, 0.1, n), 0, None),
        "heapUsedMb": 2000 + rng.normal(0, 50, n).clip(-1000, 1000),
        "lastCheckpointDurationMs": np.full(n, 800.0),
        "lastCheckpointSizeBytes": np.full(n, 5e7),
        "numRestarts": np.floor(t / 2700.0),
        "jobRunning": np.ones(n),
        "taskManagers": np.full(n, 24.0),
        "taskSlotsTotal": np.full(n, 24.0),
        "configParallelism": np.full(n, 24.0),
        "configTaskSlots": np.ones(n),
        "configCpu": np.ones(n),
        "configMemoryMb": np.full(n, 4096.0),
        "configCheckpointIntervalS": np.full(n, 10.0),
    }


def synthetic_raw(
    job: str = "bench",
    start_ms: int = 1_700_000_000_000,
    seconds: int = 3600,
    *,
    vertices: int = 4,
    subtasks: int = 24,
    seed: int = 0,
) -> pd.DataFrame:
    """``seconds`` of 1 s samples from ``start_ms`` (seeded), raw schema and dtypes."""
    rng = np.random.default_rng(seed)
    t = np.arange(seconds, dtype=np.int64)
    ts = start_ms + t * 1000
    job_vals = _job_values(seconds, (start_ms // 1000 + t).astype(float), rng)
    parts = [pd.DataFrame({"metric": m, "vertex": "", "subtask": -1, "ts_ms": ts, "value": job_vals[m]}) for m in JOB_METRICS]
    k = vertices * subtasks
    ts_sub = np.repeat(ts, k)
    vertex_names = np.array([f"v{i}" for i in range(vertices)])
    vtx = np.tile(np.repeat(vertex_names, subtasks), seconds)
    sub = np.tile(np.tile(np.arange(subtasks, dtype=np.int32), vertices), seconds)
    per_sub_rate = np.repeat(job_vals["workloadRate"] / subtasks, k)
    busy = np.clip(rng.normal(500, 100, seconds * k), 0, 1000)
    bp = np.clip(rng.normal(50, 20, seconds * k), 0, 1000 - busy)
    sub_vals = {
        "numRecordsInPerSecond": per_sub_rate,
        "numRecordsOutPerSecond": per_sub_rate,
        "busyTimeMsPerSecond": busy,
        "backPressuredTimeMsPerSecond": bp,
        "idleTimeMsPerSecond": 1000 - busy - bp,
    }
    parts += [
        pd.DataFrame({"metric": m, "vertex": vtx, "subtask": sub, "ts_ms": ts_sub, "value": v}) for m, v in sub_vals.items()
    ]
    out = pd.concat(parts, ignore_index=True)
    out.insert(0, "job", job)
    return out.astype(RAW_DTYPES)
