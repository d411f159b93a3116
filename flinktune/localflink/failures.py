"""Failure injection on the local cluster: kill a TaskManager by PID, start a new one, time recovery.

Use :func:`inject_taskmanager_failure` while the benchmark job runs. It records the pre-failure
throughput, SIGKILLs one TaskManager JVM of this cluster (by its own PID, never by name), starts
a replacement of the same shape after ``replace_after_s``, and times the recovery as the twin
defines it where a real job allows: from the failure until the job processes at the offered
rate again (the source's output, the slope of counter polls over ``window_s``, within
``tolerance`` of the pre-failure level; :func:`recovery_point`; not the 60 s meters). Caveat: the paced generator
restarts its schedule on restore, so the backlog of the outage is not
replayed; the measured recovery is therefore a lower bound of a queue-fed job's.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from flinktune.localflink.cluster import ClusterError, LocalFlinkCluster
from flinktune.localflink.jobcontrol import JobControl
from flinktune.localflink.rest import RestError
from flinktune.localflink.saturation import least_squares_rate

__all__ = ["RecoveryResult", "inject_taskmanager_failure", "kill_taskmanager", "recovery_point"]


@dataclass(frozen=True)
class RecoveryResult:
    """Timings (seconds after the kill) of one injected TaskManager failure."""

    killed_pid: int
    replacement_pid: int
    detected_s: float | None
    running_again_s: float | None
    recovery_s: float
    recovered: bool
    pre_failure_rate: float


def kill_taskmanager(cluster: LocalFlinkCluster, pid: int | None = None) -> int:
    """SIGKILL one TaskManager of ``cluster`` (``pid`` or the oldest) and return its PID."""
    tms = cluster.taskmanagers()
    if not tms:
        raise ClusterError(f"no TaskManager of the cluster in {cluster.state_dir} is running")
    target = next((t for t in tms if t.pid == pid), None) if pid is not None else tms[0]
    if target is None:
        raise ClusterError(f"PID {pid} is not a TaskManager of the cluster in {cluster.state_dir} (live: {[t.pid for t in tms]})")
    cluster.stop_process(target.pid, kill=True)
    return target.pid


def _records_out(control: JobControl) -> float | None:
    """Source records emitted so far by the current attempt (a counter), or None when unavailable."""
    jid = control.job_id()
    if jid is None:
        return None
    try:
        d = control.details(jid)
        if d.get("state") != "RUNNING":
            return None
        src = next(v for v in d["vertices"] if v["name"].startswith("Source"))
        p = int(src.get("parallelism", 1))
        vals = control.rest.get(
            f"/jobs/{jid}/vertices/{src['id']}/metrics?get=" + ",".join(f"{i}.numRecordsOut" for i in range(p))
        )
        return float(sum(float(m["value"]) for m in vals)) if len(vals) == p else None
    except (RestError, StopIteration, KeyError, ValueError):
        return None


def recovery_point(
    t: Sequence[float], count: Sequence[float], target_rate: float, *, tolerance: float = 0.2, window_s: float = 8.0
) -> float | None:
    """The first poll time from which the job emits at ``(1 - tolerance) x target_rate`` over ``window_s``, or None.

    ``t`` (s, increasing) and ``count`` are polls of the source's record counter after a failure.
    The rate is the least-squares slope over the window: a REST read can be up to a second stale,
    so a rate from two successive reads swings between about half and
    twice the truth and a "stable for N polls" test never settles. A counter that falls (the job
    restarted again, e.g. the adaptive scheduler rescaling onto the replacement TaskManager)
    starts a new segment: windows never span a restart. Needs 3 polls covering 80 % of the window.
    """
    tt, cc = np.asarray(t, dtype=float), np.asarray(count, dtype=float)
    if tt.shape != cc.shape:
        raise ValueError(f"recovery_point: {tt.size} times but {cc.size} counts")
    segment = np.concatenate([[0], np.cumsum(np.diff(cc) < 0)]) if cc.size else cc
    for i in range(tt.size):
        sel = (tt >= tt[i]) & (tt <= tt[i] + window_s) & (segment == segment[i])
        if sel.sum() < 3 or tt[sel][-1] - tt[i] < 0.8 * window_s:
            continue
        if least_squares_rate(tt[sel], cc[sel]) >= (1.0 - tolerance) * target_rate:
            return float(tt[i])
    return None


def _rate(control: JobControl, span_s: float = 8.0, timeout_s: float = 40.0) -> float:
    """Source records/s: the slope of counter polls over ``span_s`` (see :func:`recovery_point` on stale reads)."""
    deadline = time.monotonic() + timeout_s
    t: list[float] = []
    c: list[float] = []
    # The first read after a quiet spell returns a value cached long ago and only then refreshes the
    # cache (P7); left in, it inflated the pre-failure rate by 1.5-2x, so no recovery ever "reached" it.
    _records_out(control)
    time.sleep(1.5)
    while time.monotonic() < deadline:
        n = _records_out(control)
        if n is not None and (not c or n >= c[-1]):
            t.append(time.monotonic())
            c.append(n)
        elif n is not None:
            t, c = [time.monotonic()], [n]  # the job restarted: start over
        if len(t) >= 3 and t[-1] - t[0] >= span_s and c[-1] > c[0]:
            return least_squares_rate(np.array(t), np.array(c))
        time.sleep(1.0)
    raise ClusterError(
        f"job {control.spec.name!r} shows no source output within {timeout_s:.0f} s: cannot time a recovery "
        "without a pre-failure rate"
    )


def inject_taskmanager_failure(
    cluster: LocalFlinkCluster,
    control: JobControl,
    *,
    pid: int | None = None,
    replace_after_s: float = 0.5,
    tolerance: float = 0.2,
    window_s: float = 8.0,
    timeout_s: float = 180.0,
) -> RecoveryResult:
    """Kill a TaskManager, replace it, and time detection, restart and recovery of the job."""
    before = _rate(control)
    victim = next((t for t in cluster.taskmanagers() if pid is None or t.pid == pid), None)
    if victim is None:
        raise ClusterError(f"no TaskManager to kill in {cluster.state_dir}")
    t0 = time.monotonic()
    wall0 = time.time()
    kill_taskmanager(cluster, victim.pid)
    time.sleep(replace_after_s)
    new = cluster.start_taskmanager(victim.slots, victim.memory_mb)
    detected = running = None
    polls_t: list[float] = []
    polls_c: list[float] = []
    poked = False
    while time.monotonic() - t0 < timeout_s:
        try:
            jid = control.job_id()
            state = control.details(jid).get("state") if jid else None
        except RestError:
            jid, state = None, None
        if detected is None and state not in (None, "RUNNING"):
            detected = time.monotonic() - t0
        if detected is not None and running is None and state == "RUNNING" and jid:
            since = control.running_since(jid)
            if since is not None and since >= wall0:
                running = since - wall0
        if running is not None:
            now_count = _records_out(control)
            if now_count is not None and not poked:
                poked = True  # the new attempt's first read refreshes the cache (P7); it can be stale
            elif now_count is not None:
                polls_t.append(time.monotonic() - t0)
                polls_c.append(now_count)
                at = recovery_point(polls_t, polls_c, before, tolerance=tolerance, window_s=window_s)
                if at is not None:
                    return RecoveryResult(victim.pid, new.pid, detected, running, at, True, before)
        time.sleep(1.0)
    return RecoveryResult(victim.pid, new.pid, detected, running, timeout_s, False, before)
