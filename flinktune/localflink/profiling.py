"""Profiling runs on the local cluster: one (configuration, rate) point -> one observation row.

Use :func:`measure_point` with a running job (already at the configuration): it sets the rate,
lets the job settle, then measures throughput and busy fraction from counter deltas (the 60 s
meters lag, P8), the job's p95 latency, CPU and heap, and returns a ``PROFILING_COLUMNS`` row plus
``busy`` and ``capacity`` (throughput / busy fraction of the busiest subtask).
"""

from __future__ import annotations

import time
import uuid
from typing import Any

import numpy as np

from flinktune.config_space import Configuration
from flinktune.localflink.jobcontrol import JobControl
from flinktune.localflink.metrics import RestMetricsSource
from flinktune.localflink.workload import RateFile

__all__ = ["measure_point", "counters"]


def counters(control: JobControl) -> tuple[float, float, float]:
    """(source records out, max over window subtasks of accumulated busy ms, wall time s) right now."""
    jid = control.require_job()
    out = busy = 0.0
    busy_per = []
    for v in control.vertices(jid):
        p = int(v.get("parallelism", 1))
        if v["name"].startswith("Source"):
            vals = control.rest.get(f"/jobs/{jid}/vertices/{v['id']}/metrics?get=" + ",".join(f"{i}.numRecordsOut" for i in range(p)))
            out = sum(float(m["value"]) for m in vals)
        else:
            vals = control.rest.get(f"/jobs/{jid}/vertices/{v['id']}/metrics?get=" + ",".join(f"{i}.accumulateBusyTimeMs" for i in range(p)))
            busy_per += [float(m["value"]) for m in vals]
    busy = max(busy_per) if busy_per else float("nan")
    return out, busy, time.time()


def measure_point(control: JobControl, source: RestMetricsSource, rate_file: RateFile, config: Configuration, rate: float,
                  *, settle_s: float = 25.0, measure_s: float = 20.0) -> dict[str, Any]:
    """Run at ``rate`` for ``settle_s`` + ``measure_s`` and return one observation (see module doc)."""
    rate_file.set(rate)
    time.sleep(settle_s)
    counters(control)  # poke the REST metric cache (P7), then read fresh values
    time.sleep(1.5)
    a = counters(control)
    t0 = time.time()
    time.sleep(measure_s)
    b = counters(control)
    dt = b[2] - a[2]
    throughput = (b[0] - a[0]) / dt
    busy = min(1.0, max((b[1] - a[1]) / (dt * 1000.0), 1e-3))
    window = source.fetch(source.job, int(t0 * 1000), int(time.time() * 1000) + 1)

    def agg(metric: str, how: str = "mean") -> float:
        s = window[window["metric"] == metric].groupby("ts_ms")["value"].sum()
        return float(getattr(s, how)()) if len(s) else float("nan")

    return {
        "job": source.job, "run_id": uuid.uuid4().hex[:16], "ts_ms": int(t0 * 1000),
        **config.to_dict(),
        "input_rate": float(rate), "throughput": throughput, "latency_ms": agg("latencyP95Ms", "max"),
        "recovery_s": np.nan, "cpu_used": agg("cpuLoad"), "memory_used_mb": agg("heapUsedMb"),
        "busy": busy, "capacity": throughput / busy,
    }
