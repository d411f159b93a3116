"""Profiling runs on the local cluster: measured points and ramps to saturation.

Two ways to profile a running job (already at the configuration to measure):

- :func:`ramp_to_saturation` (use this for capacity): a few short steps of rising input rate
  until the job falls behind, then, if needed, one step just under that limit to confirm it;
  each step is polled about once a second (:func:`snapshot`) and summarised by
  :mod:`flinktune.localflink.saturation`; returns a :class:`CapacityEstimate` and the steps.
  Steps are ``settle_s + measure_s`` (about 20 s), so a parallelism costs one to two minutes;
- :func:`measure_point`: one rate, throughput and the busy-time capacity from two counter
  reads (the calibration sweep's point; the busy-time capacity over-predicts at low load).

:func:`observation_row` turns a step into a ``PROFILING_COLUMNS`` row (the calibration table).
"""

from __future__ import annotations

import dataclasses
import time
import uuid
from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd

from flinktune.config_space import Configuration
from flinktune.localflink.cpu import CpuMeter
from flinktune.localflink.jobcontrol import JobControl
from flinktune.localflink.metrics import RestMetricsSource
from flinktune.localflink.rest import RestError
from flinktune.localflink.saturation import (
    SNAPSHOT_COLUMNS,
    CapacityEstimate,
    StepSummary,
    estimate_capacity,
    next_step_rate,
    summarize_step,
)
from flinktune.localflink.workload import RateFile

__all__ = [
    "counters",
    "disturbed",
    "measure_point",
    "observation_row",
    "ramp_to_saturation",
    "reset_backlog",
    "run_step",
    "snapshot",
]


def counters(control: JobControl) -> tuple[float, float, float]:
    """(source records out, max over window subtasks of accumulated busy ms, wall time s) right now."""
    jid = control.require_job()
    out = busy = 0.0
    busy_per = []
    for v in control.vertices(jid):
        p = int(v.get("parallelism", 1))
        if v["name"].startswith("Source"):
            vals = control.rest.get(
                f"/jobs/{jid}/vertices/{v['id']}/metrics?get=" + ",".join(f"{i}.numRecordsOut" for i in range(p))
            )
            out = sum(float(m["value"]) for m in vals)
        else:
            vals = control.rest.get(
                f"/jobs/{jid}/vertices/{v['id']}/metrics?get=" + ",".join(f"{i}.accumulateBusyTimeMs" for i in range(p))
            )
            busy_per += [float(m["value"]) for m in vals]
    busy = max(busy_per) if busy_per else float("nan")
    return out, busy, time.time()


def measure_point(
    control: JobControl,
    source: RestMetricsSource,
    rate_file: RateFile,
    config: Configuration,
    rate: float,
    *,
    settle_s: float = 25.0,
    measure_s: float = 20.0,
) -> dict[str, Any]:
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
        "job": source.job,
        "run_id": uuid.uuid4().hex[:16],
        "ts_ms": int(t0 * 1000),
        **config.to_dict(),
        "input_rate": float(rate),
        "throughput": throughput,
        "latency_ms": agg("latencyP95Ms", "max"),
        "recovery_s": np.nan,
        "cpu_used": agg("cpuLoad"),
        "memory_used_mb": agg("heapUsedMb"),
        "busy": busy,
        "capacity": throughput / busy,
    }


# -- ramps to saturation ---------------------------------------------------------------------------
_pending_names: dict[tuple[str, str], list[str]] = {}


def _pending_metrics(control: JobControl, jid: str, vid: str) -> list[str]:
    """Operator-scoped backlog gauges of a source vertex (``<i>.Source__<name>.pendingRecords``)."""
    key = (jid, vid)
    if key not in _pending_names:
        names = [m["id"] for m in control.rest.get(f"/jobs/{jid}/vertices/{vid}/subtasks/metrics")]
        found = [n for n in names if n.endswith(".pendingRecords")]
        if not found:
            return []  # a new job's first answers can be empty: ask again at the next poll
        _pending_names[key] = found
    return _pending_names[key]


def snapshot(control: JobControl, jid: str) -> dict[str, float] | None:
    """One poll of the counters a step is summarised from (a row of ``SNAPSHOT_COLUMNS``), or None.

    None while any value is still missing (a new attempt's metrics take a few seconds to appear).
    """
    row = {"t_s": time.time(), "records_out": 0.0, "busy_ms": 0.0, "backpressured_ms": 0.0, "pending": 0.0}
    seen_source = seen_other = False
    for v in control.vertices(jid):
        vid, p = v["id"], int(v.get("parallelism", 1))
        is_source = v["name"].startswith("Source")
        names = (
            ["numRecordsOut", "accumulateBackPressuredTimeMs", *_pending_metrics(control, jid, vid)]
            if is_source
            else ["accumulateBusyTimeMs"]
        )
        wanted = [f"{i}.{n}" for i in range(p) for n in names]
        values: dict[str, list[float]] = {}
        for m in control.rest.get(f"/jobs/{jid}/vertices/{vid}/metrics?get={','.join(wanted)}"):
            _idx, name = m["id"].split(".", 1)
            try:
                values.setdefault(name.rsplit(".", 1)[-1], []).append(float(m["value"]))
            except (TypeError, ValueError):
                return None
        if is_source:
            if len(values.get("numRecordsOut", [])) != p or len(values.get("pendingRecords", [])) != p:
                return None
            row["records_out"] += sum(values["numRecordsOut"])
            row["backpressured_ms"] = max(row["backpressured_ms"], *values.get("accumulateBackPressuredTimeMs", [0.0]))
            row["pending"] += sum(values["pendingRecords"])
            seen_source = True
        else:
            if len(values.get("accumulateBusyTimeMs", [])) != p:
                return None
            # The busiest subtask of any non-source vertex bounds the job (the autoscaler's MAX).
            row["busy_ms"] = max(row["busy_ms"], *values["accumulateBusyTimeMs"])
            seen_other = True
    return row if seen_source and seen_other else None


def reset_backlog(
    rate_file: RateFile,
    pause_s: float = 2.5,
    *,
    control: JobControl | None = None,
    drained_below: float = 1000.0,
    timeout_s: float = 30.0,
) -> bool:
    """Drop the backlog a saturated step left: at rate 0 the paced source moves its schedule to now.

    Without this the next (lower) step would measure the catch-up, not the rate it is offered.
    ``pause_s`` covers the source's 0.5 s re-read of the rate file and the drain of in-flight buffers.
    With ``control``, it then polls until the sources report fewer than ``drained_below`` pending
    records (a back-pressured source only sees the pause once its output buffers drain, which
    on a busy window vertex can take longer than the pause) or ``timeout_s`` passes; returns
    whether the backlog was seen drained (always True without ``control``).
    """
    rate_file.set(0.0)
    time.sleep(pause_s)
    if control is None:
        return True
    jid = control.require_job()
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            row = snapshot(control, jid)
        except RestError:
            row = None
        if row is not None and row["pending"] < drained_below:
            return True
        time.sleep(1.0)
    return False


def run_step(
    control: JobControl,
    rate_file: RateFile,
    rate: float,
    *,
    settle_s: float = 5.0,
    measure_s: float = 15.0,
    poll_s: float = 1.0,
    source: RestMetricsSource | None = None,
    cpu: CpuMeter | None = None,
    where: str = "profiling step",
) -> tuple[StepSummary, pd.DataFrame]:
    """Offer ``rate`` for ``settle_s``, poll counters every ``poll_s`` for ``measure_s``, and summarise.

    The frame returned has ``SNAPSHOT_COLUMNS`` plus ``target_rate`` (the recording the summary
    came from). ``source`` (a polling :class:`RestMetricsSource`) adds the job's p95 latency over
    the measurement; ``cpu`` adds machine and cluster cores.
    """
    jid = control.require_job()
    rate_file.set(rate)
    deadline = time.monotonic() + settle_s
    while time.monotonic() < deadline:  # keep the REST metric cache warm (P7) while the rate settles
        try:
            snapshot(control, jid)
        except RestError:
            pass
        time.sleep(poll_s)
    if cpu is not None:
        cpu.mark()
    t0 = time.time()
    rows: list[dict[str, float]] = []
    end = time.monotonic() + measure_s
    while time.monotonic() < end:
        tick = time.monotonic()
        try:
            row = snapshot(control, jid)
        except RestError:
            row = None  # one failed poll only thins the frame; summarize_step decides if it is enough
        if row is not None:
            rows.append(row)
        time.sleep(max(0.0, poll_s - (time.monotonic() - tick)))
    frame = pd.DataFrame(rows, columns=list(SNAPSHOT_COLUMNS))
    step = summarize_step(frame, rate, where=f"{where} at {rate:,.0f} rec/s")
    extra: dict[str, Any] = {}  # float fields of StepSummary, passed by name to replace()
    if source is not None:
        window = source.fetch(source.job, int(t0 * 1000), int(time.time() * 1000) + 1)
        p95 = window.loc[window["metric"] == "latencyP95Ms", "value"]
        # The median of the gauge: its first seconds can still cover results of a cleared backlog.
        extra["latency_p95_ms"] = float(p95.median()) if len(p95) else float("nan")
    if cpu is not None:
        extra["machine_cores"], extra["flink_cores"] = cpu.read()
    frame["target_rate"] = float(rate)
    return dataclasses.replace(step, **extra), frame


def disturbed(step: StepSummary, max_neighbour_cores: float) -> bool:
    """Whether other processes used more than ``max_neighbour_cores`` cores during ``step`` (False unmeasured).

    The driver itself polls REST about once a second (a few % of a core), hence a margin rather than zero.
    """
    extra = step.machine_cores - step.flink_cores
    return bool(np.isfinite(extra) and extra > max_neighbour_cores)


def ramp_to_saturation(
    control: JobControl,
    rate_file: RateFile,
    config: Configuration,
    start_rate: float,
    *,
    source: RestMetricsSource | None = None,
    cpu: CpuMeter | None = None,
    max_steps: int = 6,
    max_rate: float = 400_000.0,
    settle_s: float = 5.0,
    measure_s: float = 15.0,
    max_neighbour_cores: float = 0.35,
    max_retries: int = 3,
    log: Callable[[str], None] | None = None,
) -> tuple[CapacityEstimate, list[StepSummary], pd.DataFrame]:
    """Step the offered rate from ``start_rate`` until the job at ``config`` falls behind (see the module doc).

    The job must already run at ``config``. Returns the estimate, the steps in order and their
    recorded frames (one DataFrame, ``step`` numbering the steps). A step interrupted by a restart
    is measured once more; a second failure raises ``ValueError`` naming the step. A step during
    which the machine used more than ``max_neighbour_cores`` cores beyond Flink's own (see
    :func:`disturbed`) is measured again, at most ``max_retries`` times per ramp.
    """
    if not start_rate > 0:
        raise ValueError(f"ramp for {config.describe()}: start rate must be positive, got {start_rate!r}")
    steps: list[StepSummary] = []
    frames: list[pd.DataFrame] = []
    rate: float | None = float(start_rate)
    retries_left = max_retries
    while rate is not None and len(steps) < max_steps and rate <= max_rate:
        where = f"ramp step {len(steps) + 1} of {config.describe()}"
        try:
            step, frame = run_step(
                control, rate_file, rate, settle_s=settle_s, measure_s=measure_s, source=source, cpu=cpu, where=where
            )
        except ValueError:
            control.wait_running(control.require_job(), parallelism=config.parallelism, timeout_s=120)
            step, frame = run_step(
                control, rate_file, rate, settle_s=settle_s, measure_s=measure_s, source=source, cpu=cpu, where=where
            )
        if disturbed(step, max_neighbour_cores) and retries_left > 0:
            # A neighbour took CPU during the step: its rate says little about this job. Measure it again.
            retries_left -= 1
            if log:
                log(
                    f"  p={config.parallelism} step at {rate:,.0f} rec/s disturbed (machine {step.machine_cores:.2f} cores, "
                    f"Flink {step.flink_cores:.2f}): measuring it again"
                )
            if step.saturated:
                reset_backlog(rate_file, control=control)
            continue
        steps.append(step)
        frames.append(frame.assign(step=len(steps)))
        if log:
            log(
                f"  p={config.parallelism} step {len(steps)}: {step.reason}; busy-time estimate "
                f"{step.busy_capacity:,.0f} rec/s; cores machine {step.machine_cores:.2f} / Flink {step.flink_cores:.2f}"
            )
        if step.saturated and not reset_backlog(rate_file, control=control) and log:
            log(f"  p={config.parallelism}: the backlog did not drain within 30 s; the next step may include catch-up")
        rate = next_step_rate(steps)
    est = estimate_capacity(config.parallelism, steps, config=config.to_dict())
    return est, steps, pd.concat(frames, ignore_index=True)


def observation_row(
    job: str, config: Configuration, step: StepSummary, *, memory_used_mb: float = float("nan"), run_id: str | None = None
) -> dict[str, Any]:
    """One ``PROFILING_COLUMNS`` row (the calibration table) for a profiling step."""
    return {
        "job": job,
        "run_id": run_id or uuid.uuid4().hex[:16],
        "ts_ms": int(step.t_start * 1000),
        **config.to_dict(),
        "input_rate": step.target_rate,
        "throughput": step.throughput,
        "latency_ms": step.latency_p95_ms,
        "recovery_s": np.nan,
        "cpu_used": step.flink_cores,
        "memory_used_mb": memory_used_mb,
    }
