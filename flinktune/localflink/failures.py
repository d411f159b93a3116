"""Failure injection on the local cluster: kill a TaskManager by PID, start a new one, time recovery.

Use :func:`inject_taskmanager_failure` while the benchmark job runs. It records the pre-failure
throughput, SIGKILLs one TaskManager JVM of this cluster (by its own PID, never by name), starts
a replacement of the same shape after ``replace_after_s``, and times the recovery as the twin
defines it where a real job allows: from the failure until the job processes at the offered
rate again (source output within ``tolerance`` of the pre-failure level for ``stable_s``
consecutive seconds, from counter deltas, not the 60 s meters). Caveat: the paced generator
restarts its schedule on restore (LOCAL_FLINK_NOTES P9), so the backlog of the outage is not
replayed; the measured recovery is therefore a lower bound of a queue-fed job's.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from flinktune.localflink.cluster import ClusterError, LocalFlinkCluster
from flinktune.localflink.jobcontrol import JobControl
from flinktune.localflink.rest import RestError

__all__ = ["RecoveryResult", "kill_taskmanager", "inject_taskmanager_failure"]


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
        vals = control.rest.get(f"/jobs/{jid}/vertices/{src['id']}/metrics?get=" + ",".join(f"{i}.numRecordsOut" for i in range(p)))
        return float(sum(float(m["value"]) for m in vals)) if len(vals) == p else None
    except (RestError, StopIteration, KeyError, ValueError):
        return None


def _rate(control: JobControl, span_s: float = 3.0, timeout_s: float = 30.0) -> float:
    """Source records/s over ``span_s`` from counter deltas; waits for the REST metric cache to fill (P7)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        a = _records_out(control)
        t = time.monotonic()
        time.sleep(span_s)
        b = _records_out(control)
        if a is not None and b is not None and b > a:
            return (b - a) / (time.monotonic() - t)
    raise ClusterError(f"job {control.spec.name!r} shows no source output within {timeout_s:.0f} s: cannot time a recovery "
                       "without a pre-failure rate")


def inject_taskmanager_failure(cluster: LocalFlinkCluster, control: JobControl, *, pid: int | None = None,
                               replace_after_s: float = 0.5, tolerance: float = 0.2, stable_s: int = 3,
                               timeout_s: float = 180.0) -> RecoveryResult:
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
    stable = 0
    last = None
    last_t = None
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
            now_t = time.monotonic()
            if now_count is not None and last is not None and now_count >= last and now_t > last_t:
                rate = (now_count - last) / (now_t - last_t)
                stable = stable + 1 if rate >= (1 - tolerance) * before else 0
                if stable >= stable_s:
                    recovery = now_t - t0 - stable_s  # when the stable stretch began
                    return RecoveryResult(victim.pid, new.pid, detected, running, recovery, True, before)
            last, last_t = now_count, now_t
        time.sleep(1.0)
    return RecoveryResult(victim.pid, new.pid, detected, running, timeout_s, False, before)
