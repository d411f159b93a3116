"""What the twin emits each second, as series: job gauges, configuration gauges and task counters.

Use :func:`job_series` and :func:`task_series` on one run's history chunk
(:mod:`flinktune.twin.history`) to get the series :func:`flinktune.twin.emit.raw_frame` turns into
raw samples; ``TwinJob.run`` does exactly that. Task counters (records in/out, busy,
backpressured and idle time) are per vertex (subtask -1) or per subtask (``detail="subtask"``),
balanced or, with a planted imbalance (:mod:`flinktune.twin.imbalance`), unequal between siblings.
"""

from __future__ import annotations

import numpy as np

from flinktune.config_space import Configuration
from flinktune.metrics.schema import CONFIG_METRICS
from flinktune.twin.dataflow import DataflowSpec
from flinktune.twin.emit import Series
from flinktune.twin.history import HistoryChunk
from flinktune.twin.imbalance import SubtaskLoads
from flinktune.twin.mechanics import Layout
from flinktune.twin.noise import normal

__all__ = ["job_series", "task_series"]


def job_series(cfg: Configuration, h: HistoryChunk) -> list[Series]:
    """Job-level series (subtask -1, no vertex): rate, lag, latencies, resources, checkpoints, ``cfg``'s knobs."""
    n = len(h["ts"])
    const = lambda v: np.full(n, float(v))  # noqa: E731
    out: list[Series] = [
        ("workloadRate", "", -1, h["rate"]),
        ("pendingRecords", "", -1, h["lag"]),
        ("latencyP50Ms", "", -1, h["latency_p50_ms"]),
        ("latencyP95Ms", "", -1, h["latency_p95_ms"]),
        ("latencyP99Ms", "", -1, h["latency_p99_ms"]),
        ("cpuLoad", "", -1, h["cpu_used"]),
        ("heapUsedMb", "", -1, h["memory_used_mb"]),
        ("lastCheckpointDurationMs", "", -1, h["checkpoint_duration_ms"]),
        ("lastCheckpointSizeBytes", "", -1, h["checkpoint_size_bytes"]),
        ("numRestarts", "", -1, h["restarts"]),
        ("jobRunning", "", -1, h["running"]),
        ("taskManagers", "", -1, const(cfg.taskmanagers)),
        ("taskSlotsTotal", "", -1, const(cfg.taskmanagers * cfg.task_slots)),
    ]
    for knob, metric in CONFIG_METRICS.items():
        out.append((metric, "", -1, const(getattr(cfg, knob))))
    return out


def task_series(
    flow: DataflowSpec,
    lay: Layout,
    h: HistoryChunk,
    eff_cap: np.ndarray,
    *,
    detail: str,
    loads: SubtaskLoads | None = None,
    seed: int = 0,
    metric_noise: float = 0.0,
) -> list[Series]:
    """Per-vertex (``detail="vertex"``) or per-subtask (``"subtask"``) record and time counters.

    ``eff_cap``: the capacity each second actually had (the load is throughput over it);
    ``loads``: the planted imbalance's subtask loads (None: balanced siblings); ``seed`` and
    ``metric_noise``: the imbalance's busy-time noise.
    """
    with np.errstate(divide="ignore", invalid="ignore"):
        load = np.where(eff_cap > 0, h["throughput"] / eff_cap, 0.0)
    saturated = (h["lag"] > 0.5) | (load >= 0.999)
    if loads is not None:
        return _imbalanced_series(flow, lay, h, load, saturated, loads, detail, seed, metric_noise)
    thr, run = h["throughput"], h["running"]
    out: list[Series] = []
    for k, v in enumerate(lay.vertices):
        rec_in = thr * lay.input_share[k]
        busy = np.minimum(1000.0 * load * lay.ratio[k], 1000.0) * run
        bp = np.where(saturated & (k < lay.bottleneck), 1000.0 - busy, 0.0) * run
        per = _counters(rec_in, flow.vertices[k].selectivity, busy, bp, run)
        if detail == "vertex":
            out.extend((m, v, -1, arr) for m, arr in per)
        else:
            pv = int(lay.parallelism[k])
            for sub in range(pv):
                out.extend((m, v, sub, arr / pv if m.startswith("numRecords") else arr) for m, arr in per)
    return out


def _counters(
    rec_in: np.ndarray, selectivity: float, busy: np.ndarray, bp: np.ndarray, run: np.ndarray
) -> list[tuple[str, np.ndarray]]:
    # Idle is what is left of each running second after busy and backpressured time.
    return [
        ("numRecordsInPerSecond", rec_in),
        ("numRecordsOutPerSecond", rec_in * selectivity),
        ("busyTimeMsPerSecond", busy),
        ("backPressuredTimeMsPerSecond", bp),
        ("idleTimeMsPerSecond", (1000.0 - busy - bp) * run),
    ]


def _imbalanced_series(
    flow: DataflowSpec,
    lay: Layout,
    h: HistoryChunk,
    load: np.ndarray,
    saturated: np.ndarray,
    loads: SubtaskLoads,
    detail: str,
    seed: int,
    noise: float,
) -> list[Series]:
    """Per-subtask time and record series when an imbalance is planted (unequal siblings).

    The slowest thread is busy ``load`` of each second; every other thread in proportion to
    its own load. When saturated, all vertices upstream of the slowest thread's vertex are
    backpressured (a full channel blocks each sender), the rest idle when not busy.
    """
    thr, run, ts = h["throughput"], h["running"], h["ts"]
    out: list[Series] = []
    lane = 0
    for k, v in enumerate(lay.vertices):
        sel = flow.vertices[k].selectivity
        per_sub: list[list[tuple[str, np.ndarray]]] = []
        for rshare, ratio in zip(loads.records[k], loads.ratio[k]):
            busy = np.minimum(1000.0 * load * ratio, 1000.0)
            if noise > 0:
                busy = np.minimum(busy * np.exp(noise * normal(seed, "busy", ts, lane=lane)), 1000.0)
            lane += 1
            busy = busy * run
            bp = np.where(saturated & (k < loads.bottleneck[0]), 1000.0 - busy, 0.0) * run
            per_sub.append(_counters(thr * lay.input_share[k] * rshare, sel, busy, bp, run))
        if detail == "subtask":
            for sub, per in enumerate(per_sub):
                out.extend((m, v, sub, arr) for m, arr in per)
        else:  # vertex level: records summed, times of the busiest subtask (the autoscaler's MAX)
            arrays = {m: np.stack([dict(p)[m] for p in per_sub]) for m, _ in per_sub[0]}
            top = np.argmax(arrays["busyTimeMsPerSecond"], axis=0)
            cols = np.arange(top.size)
            for m, arr in arrays.items():
                out.append((m, v, -1, arr.sum(axis=0) if m.startswith("numRecords") else arr[top, cols]))
    return out
