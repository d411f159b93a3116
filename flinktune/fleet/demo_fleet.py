"""The demo's fleet: N twin jobs of different kinds and loads, written as a fleet file and run through the DAGs.

Use :func:`demo_jobs` for the jobs (kind and load cycle so that no two of the first six are alike),
:func:`write_demo_fleet` for their ``fleet.yaml`` (the format of ``flinktune fleet init``, checked
by :func:`flinktune.fleet.load_fleet_file` before anything runs) and their input traces, then
:func:`run_fleet_demo`: each job's history ingested on its own trace, one training run and one
decision run over the whole fleet (the DAGs map over ``FLINKTUNE_FLEET_FILE``), then each job's
tuned hours curated and reported. ``flinktune demo --jobs N`` (N > 1) runs it; one job keeps the
single-job demo.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from flinktune.fleet.registry import load_fleet_file
from flinktune.job_name import job_name

__all__ = ["KINDS", "LOADS", "MAX_JOBS", "DemoJob", "FleetDemoRun", "demo_jobs", "run_fleet_demo", "write_demo_fleet"]

#: The twin's built-in job kinds (trace shape and dataflow), in the order the demo's jobs take them.
KINDS: tuple[str, ...] = ("ysb", "tsw")
#: Loads as a share of a kind's built-in rates; with two kinds, six jobs are six different pairs.
LOADS: tuple[float, ...] = (1.0, 0.6, 0.8)
MAX_JOBS = len(KINDS) * len(LOADS)
#: Trace hours beyond the history and the tuned hours (the last decision's forecast looks ahead).
_TRACE_MARGIN_H = 1.0


@dataclass(frozen=True)
class DemoJob:
    """One job of the demo's fleet: its name, twin kind, load (share of the kind's rates) and seed."""

    name: str
    kind: str
    load: float
    seed: int


@dataclass(frozen=True)
class FleetDemoRun:
    """What :func:`run_fleet_demo` leaves: each job's report (``jobs.report``'s summary) by job name."""

    reports: dict[str, dict[str, Any]]


def demo_jobs(n: int, *, prefix: str, seed: int, first_kind: str = KINDS[0]) -> list[DemoJob]:
    """``n`` jobs named ``<prefix>-<i>-<kind>``: job i takes the i-th of the kinds from ``first_kind`` on, in
    turn, ``LOADS[i % 3]`` and seed ``seed + i``. Raises ValueError (a name too long, ``n`` out of range)."""
    if not 1 <= n <= MAX_JOBS:
        raise ValueError(f"--jobs {n}: the demo runs 1 to {MAX_JOBS} jobs (each a different kind and load)")
    if first_kind not in KINDS:
        raise ValueError(f"unknown workload kind {first_kind!r}; known: {', '.join(KINDS)}")
    kinds = KINDS[KINDS.index(first_kind) :] + KINDS[: KINDS.index(first_kind)]
    jobs = []
    for i in range(n):
        kind = kinds[i % len(kinds)]
        name = job_name(f"{prefix}-{i + 1}-{kind}", where=f"--job {prefix!r} gives job {i + 1} the name")
        jobs.append(DemoJob(name, kind, LOADS[i % len(LOADS)], seed + i))
    return jobs


def _trace_csv(job: DemoJob, hours: float, path: Path) -> Path:
    """The job's built-in trace at its load, one ``timestamp,rate`` line a second (epoch seconds)."""
    from flinktune.twin.simulator import DEFAULT_START_TS
    from flinktune.twin.workload import generate_trace

    trace = generate_trace(job.kind, hours, job.seed, start=pd.Timestamp(DEFAULT_START_TS, unit="s", tz="UTC")) * job.load
    ts = trace.index.as_unit("s").asi8
    lines = [f"# {job.name}: the built-in {job.kind} trace at {job.load:g} x its rates, seed {job.seed}", "timestamp,rate"]
    lines += [f"{t},{v:.1f}" for t, v in zip(ts.tolist(), np.round(trace.to_numpy(), 1).tolist(), strict=True)]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n")
    return path


def write_demo_fleet(
    folder: Path, jobs: list[DemoJob], *, latency_target_ms: float, policy: str, hours: float
) -> tuple[Path, dict[str, Path]]:
    """``<folder>/fleet.yaml`` and ``<folder>/traces/<job>.csv`` (``hours`` of trace each): the file and the traces by job.

    Raises ValueError naming the job when the fleet file holds one (it would be left out of the runs).
    """
    lines = [
        "# The demo's fleet: twin jobs of different kinds and loads (format: docs/fleet.md).",
        "defaults:",
        f"  latency_target_ms: {latency_target_ms:g}",
        f"  policy: {policy}",
        "  mode: act                # the twin is a simulation: the demo applies its decisions",
        "jobs:",
    ]
    for job in jobs:
        lines += [
            f"  - name: {job.name}",
            f"    kind: {job.kind}                # at {job.load:g} x the {job.kind} trace's rates",
        ]
    path = folder / "fleet.yaml"
    path.write_text("\n".join(lines) + "\n")
    fleet = load_fleet_file(path)
    if fleet.held():
        raise ValueError("; ".join(f"{e.name}: {e.held}" for e in fleet.held()))
    traces = {job.name: _trace_csv(job, hours, folder / "traces" / f"{job.name}.csv") for job in jobs}
    return path, traces


def run_fleet_demo(
    var_dir: Path,
    jobs: list[DemoJob],
    *,
    history_hours: float,
    tuned_hours: float,
    policy: str,
    latency_target_ms: float,
    ticks: int,
    env: Mapping[str, str],
) -> FleetDemoRun:
    """Write the fleet and run it through the DAGs in one child process (module doc); ``env`` goes to the tasks."""
    from flinktune.airflow_local.runner import LocalPipeline

    fleet_file, traces = write_demo_fleet(
        var_dir, jobs, latency_target_ms=latency_target_ms, policy=policy, hours=history_hours + tuned_hours + _TRACE_MARGIN_H
    )
    ingest = [
        (
            "flinktune_ingest",
            {"job": j.name, "workload": j.kind, "hours": history_hours, "seed": j.seed, "trace_file": str(traces[j.name])},
        )
        for j in jobs
    ]
    # No job in the conf: the train and decide runs map over the fleet file's jobs.
    learn_and_decide: list[tuple[str, dict[str, Any]]] = [
        ("flinktune_train", {}),
        ("flinktune_decide", {"policy": policy, "dry_run": False, "ticks": ticks}),
    ]
    with LocalPipeline(var_dir, env={**env, "FLINKTUNE_FLEET_FILE": str(fleet_file)}) as pipeline:
        first = pipeline.run([*ingest, *learn_and_decide])
        # Each decision run wrote its job's tuned period to the raw lake: curate just that period, then report.
        tuned = [
            (
                "flinktune_ingest",
                {"job": j.name, "metrics_source": "lake", "start_ms": int(first[i]["returns"]["collect"]["end_ms"])},
            )
            for i, j in enumerate(jobs)
        ]
        reports = pipeline.run([*tuned, *(("flinktune_report", {"job": j.name}) for j in jobs)])
    return FleetDemoRun({j.name: r["returns"]["report"] for j, r in zip(jobs, reports[len(jobs) :], strict=True)})
