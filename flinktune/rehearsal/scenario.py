"""The rehearsal's scenario: start the topology, offer each job its rate plan, let the DAGs run
unattended on their short schedules, let the decide and ingest runs in flight finish (no new one
starts), then report what happened and stop everything.

Use :func:`rehearse` (``flinktune rehearse --minutes N``). The rehearsal drives nothing but the
offered rates (the producers' part); extract, ETL, training, decisions and rescaling are the
scheduled DAG runs on the Celery workers. Each job's plan is low -> high -> low
(:class:`flinktune.localflink.workload.RatePlan` phases), so the high level needs a scale-up and the
low level after it makes a scale-down right.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from flinktune.lake import Lake
from flinktune.localflink.workload import RatePlan
from flinktune.quantities import LATENCY_MS, check, cron, finite
from flinktune.rehearsal.drain import drain_decide, drain_ingest
from flinktune.rehearsal.servers import Stack, session_members
from flinktune.rehearsal.stack import DAGS, JobPlan, Topology, start_topology
from flinktune.rehearsal.verdicts import job_report, write_report

__all__ = ["DEFAULT_JOBS", "RehearsalOptions", "rehearse"]

#: The benchmark job at two sizes. A record costs a little CPU (``work``: about 1.7 ns an iteration here) and a
#: wait (``wait_us``, an external lookup's latency), so a subtask carries about 9,000 and 4,700 rec/s while the
#: two jobs together use well under a core at their high levels: on two cores the topology itself (Airflow,
#: Spark, Prometheus, MLflow) needs the rest. (A CPU-bound plan needs more than one core per job at high for p=1
#: to fall behind, and then the machine carries neither job.) Each high level
#: is about 1.3x what p=1 carries and two thirds of what p=2 carries, so p=2 is due; each low level is a sixth.
DEFAULT_JOBS = (
    JobPlan("bench-small", work=2000, wait_us=100, low=2000, high=12000),
    JobPlan("bench-large", work=4000, wait_us=200, low=1000, high=6000),
)
_PHASES = (0.1, 0.15, 0.3, 0.1, 0.35)  # low, rise, high, fall, low: the last low is long enough to judge a scale-down


@dataclass(frozen=True)
class RehearsalOptions:
    """How long, where, and the short schedules the DAGs run on (production keeps its own)."""

    minutes: float
    var_dir: Path
    jar: Path
    jobs: tuple[JobPlan, ...] = DEFAULT_JOBS
    policy: str = "ds2"
    latency_target_ms: float = 3000.0
    ingest_every_s: int = 20
    decide_cron: str = "* * * * *"
    retrain_cron: str = "*/10 * * * *"
    # The window each decision reads (the lake's history, then Prometheus after the lake's newest sample): one
    # decide period, as in production (FLINKTUNE_DECISION_INTERVAL_S). DS2 sizes for the window's mean rate, which
    # trails a rising load by half the window: 120 s put each scale-up a minute behind the load.
    decision_interval_s: int = 60
    spark_workers: int = 2
    celery_workers: int = 2
    drain_timeout_s: float = 900.0  # at the end: how long the decide, then the ingest run in flight may take to end (each)

    def __post_init__(self) -> None:
        # Checked here, before any server starts: a bad cron used to surface minutes later, from Airflow.
        check(LATENCY_MS, self.latency_target_ms, "latency_target_ms")
        cron(self.decide_cron, "decide_cron")
        cron(self.retrain_cron, "retrain_cron")
        for name in ("minutes", "drain_timeout_s"):
            finite(getattr(self, name), name)


def _plan(job: JobPlan, seconds: float) -> RatePlan:
    t = np.cumsum((0.0, *_PHASES)) * seconds
    lo, hi = job.low, job.high
    return RatePlan(((t[0], lo), (t[1], lo), (t[2], hi), (t[3], hi), (t[4], lo), (t[5], lo)), lo, hi)


def _celery_runs(logs: Path) -> dict[str, int]:
    """Per Celery worker, the task workloads it ran to the end (its own log's ``Task execute_workload[...]
    succeeded`` lines: the worker's word, since a task instance's hostname is the machine's)."""
    return {
        f.stem.removeprefix("airflow-"): f.read_text(errors="replace").count("] succeeded in ")
        for f in sorted(logs.glob("airflow-celery-worker-*.log"))
    }


def _task_summary(topo: Topology) -> dict[str, Any]:
    """Task instances per DAG and state, the machines that ran them (their hostnames) and the median
    duration of each DAG's tasks that ended (``<dag>.<task>``: s)."""
    api = topo.session()
    out: dict[str, Any] = {"by_dag": {}, "hostnames": {}, "duration_s_median": {}}
    durations: dict[str, list[float]] = {}
    for dag_id in DAGS:
        got = api.get(f"{topo.api}/api/v2/dags/{dag_id}/dagRuns/~/taskInstances", params={"limit": 1000}, timeout=60)
        if not got.ok:
            out["by_dag"][dag_id] = {"error": f"HTTP {got.status_code}"}
            continue
        states: dict[str, int] = {}
        for ti in got.json().get("task_instances", []):
            key = f"{ti['task_id']}:{ti['state']}"
            states[key] = states.get(key, 0) + 1
            if ti.get("hostname") and ti["state"] in ("success", "failed"):
                out["hostnames"][ti["hostname"]] = out["hostnames"].get(ti["hostname"], 0) + 1
            if ti["state"] in ("success", "failed") and ti.get("duration") is not None:
                durations.setdefault(f"{dag_id}.{ti['task_id']}", []).append(float(ti["duration"]))
        out["by_dag"][dag_id] = states
    out["duration_s_median"] = {k: round(float(np.median(v)), 1) for k, v in sorted(durations.items())}
    return out


def rehearse(opts: RehearsalOptions, *, log: Callable[[str], None] = print) -> dict[str, Any]:
    """Run the rehearsal (module docstring); returns its summary (also in ``<var_dir>/rehearsal/rehearsal.json``).

    Every process is stopped by its process group or PID when it ends, on an error and on Ctrl-C
    (SIGINT and SIGTERM end the run the same way).
    """
    var_dir = opts.var_dir.resolve()
    t_start = time.monotonic()

    def say(msg: str) -> None:
        log(f"[rehearse {time.monotonic() - t_start:6.0f}s] {msg}")

    def stop_on_signal(signum: int, _frame: object) -> None:
        raise KeyboardInterrupt(f"signal {signum}")

    previous = signal.signal(signal.SIGTERM, stop_on_signal)
    summary: dict[str, Any] = {
        "minutes": opts.minutes,
        "policy": opts.policy,
        "latency_target_ms": opts.latency_target_ms,
        "schedules": {"ingest_every_s": opts.ingest_every_s, "decide_cron": opts.decide_cron, "retrain_cron": opts.retrain_cron},
    }
    stack = Stack(var_dir / "logs", log=say)
    try:
        with stack:
            flinktune_env = {
                "FLINKTUNE_LATENCY_TARGET_MS": f"{opts.latency_target_ms:g}",
                "FLINKTUNE_DECISION_INTERVAL_S": str(opts.decision_interval_s),
                "FLINKTUNE_SCHEDULE_INGEST_EVERY_S": str(opts.ingest_every_s),
                "FLINKTUNE_SCHEDULE_DECIDE_CRON": opts.decide_cron,
                "FLINKTUNE_SCHEDULE_RETRAIN_CRON": opts.retrain_cron,
                # The rehearsal decides every minute already: a watch beside it would only add runs on 2 cores.
                "FLINKTUNE_SCHEDULE_WATCH_CRON": "off",
            }
            topo = start_topology(
                stack,
                var_dir,
                opts.jobs,
                jar=opts.jar,
                flinktune_env=flinktune_env,
                policy=opts.policy,
                latency_target_ms=opts.latency_target_ms,
                spark_workers=opts.spark_workers,
                celery_workers=opts.celery_workers,
            )
            summary["stack_ready_s"] = round(time.monotonic() - t_start)
            seconds = opts.minutes * 60
            plans = {j.name: _plan(j, seconds) for j in opts.jobs}
            t0 = time.time()
            next_line = 0.0
            from flinktune.decision.store import SqlStateStore

            store = SqlStateStore(topo.state_url)
            while (elapsed := time.time() - t0) < seconds:
                for name, plan in plans.items():
                    topo.rates[name].set(plan.rate_at(elapsed))
                if elapsed >= next_line:
                    stack.check()
                    parts = []
                    for name in plans:
                        d = store.decisions(name)
                        last = "" if d is None or d.empty else f", last: {d['action'].iloc[-1]} ({d['reason'].iloc[-1][:70]})"
                        n = 0 if d is None else len(d)
                        parts.append(f"{name} {plans[name].rate_at(elapsed):,.0f} rec/s, {n} decisions{last}")
                    say(f"t={elapsed:4.0f}/{seconds:.0f} s | " + " | ".join(parts))
                    next_line = elapsed + 30
                time.sleep(2)
            end_ts = time.time()
            say("plan over: no new decision; letting the decide and ingest runs in flight finish")
            t_drain = time.monotonic()
            summary["decide_drained"] = drain_decide(topo, opts.drain_timeout_s, stack.check)
            summary["decide_drain_s"] = round(time.monotonic() - t_drain)
            say(f"decide {'drained' if summary['decide_drained'] else 'NOT drained'} in {summary['decide_drain_s']} s")
            t_drain = time.monotonic()
            summary["ingest_drained"] = drain_ingest(topo, opts.drain_timeout_s, stack.check)
            summary["ingest_drain_s"] = round(time.monotonic() - t_drain)
            drained = "drained" if summary["ingest_drained"] else "NOT drained"
            say(f"ingest {drained} in {summary['ingest_drain_s']} s: collecting outcomes")
            summary["tasks"] = _task_summary(topo)
            lake = Lake(var_dir / "lake")
            summary["jobs"] = {}
            for name in plans:
                raw = lake.read_raw(name, int((t0 - 120) * 1000), int(end_ts * 1000) + 1)
                decisions = store.decisions(name)
                import pandas as pd

                decisions = decisions if decisions is not None else pd.DataFrame(columns=["action", "status", "reason"])
                summary["jobs"][name] = job_report(name, decisions, raw, latency_target_ms=opts.latency_target_ms, end_ts=end_ts)
                summary["jobs"][name]["rate_plan"] = {"low": plans[name].low, "high": plans[name].high}
            summary["pids"] = {s.name: s.pid for s in stack.servers}
            summary["flink_pids"] = {
                n: c.status()["taskmanager_pids"] + [c.status()["jobmanager_pid"]] for n, c in topo.clusters.items()
            }
    except KeyboardInterrupt:
        say("interrupted: stopped everything")
        summary["interrupted"] = True
    finally:
        signal.signal(signal.SIGTERM, previous)
    summary["celery_workers_ran"] = _celery_runs(var_dir / "logs")
    summary["left_running"] = _left_running(summary)
    summary["wall_s"] = round(time.monotonic() - t_start)
    path = write_report(var_dir / "rehearsal", summary)
    say(f"report: {path}; left running: {summary['left_running'] or 'nothing'}")
    return summary


def _alive(pid: int) -> bool:
    """True while ``pid`` runs (a zombie, an exited child not yet reaped, does not count)."""
    try:
        os.waitpid(pid, os.WNOHANG)  # reap our own children (the Flink JVMs this process started)
    except ChildProcessError:
        pass
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


def _left_running(summary: dict[str, Any]) -> list[int]:
    """PIDs of this run still alive after the stop (should be none): the servers, every process of
    their sessions (task runners, Spark drivers) and the Flink JVMs."""
    servers = list(summary.get("pids", {}).values())
    pids = servers + [p for ps in summary.get("flink_pids", {}).values() for p in ps if p]
    pids += [m for sid in servers for m in session_members(int(sid))]
    return sorted({int(p) for p in pids if _alive(int(p))})
