"""Run the twin from the static-max configuration and write its metrics to the lake.

``python -m jobs.simulate --job demo --workload ysb --hours 6 --seed 7`` generates (or reads, with
``--trace-file``) an input-rate trace, runs the twin over its first ``hours`` with a failure every
45 minutes timed just before a checkpoint, writes the raw samples hour by hour, and persists the
twin and the whole trace under ``<twin_dir>/<job>/`` so ``jobs.decide`` continues both.
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from flinktune.config_space import ConfigSpace
from flinktune.entry import OneLineParser, run_main
from flinktune.job_name import job_name
from flinktune.lake import Lake
from flinktune.settings import Settings, load_settings
from flinktune.twin.job_store import save_job
from flinktune.twin.profile import ClusterProfile
from flinktune.twin.simulator import DEFAULT_START_TS, TwinJob
from flinktune.twin.workload import WORKLOADS, TraceError, generate_trace, load_trace_csv

__all__ = ["FAILURES", "TRACE_EXTRA_HOURS", "main", "run"]

#: Failure schedule of simulated history (docs/DESIGN.md section 7).
FAILURES = "every:45m"
#: Hours of trace generated beyond the simulated ones, for the decision job to continue.
TRACE_EXTRA_HOURS = 18.0


def run(
    *,
    job: str = "demo",
    workload: str = "ysb",
    hours: float = 6.0,
    seed: int = 7,
    trace_file: str | Path | None = None,
    settings: Settings | None = None,
) -> dict:
    """Simulate ``hours`` of ``job``; returns ``{job, start_ms, end_ms, rows, files}`` (end exclusive)."""
    job = job_name(job)  # before it reaches any path, model name or API call
    settings = settings or load_settings()
    if workload not in WORKLOADS:
        raise ValueError(f"unknown workload {workload!r}; known: {sorted(WORKLOADS)}")
    if not hours > 0:
        raise ValueError(f"hours must be > 0, got {hours!r}")
    seconds = int(round(hours * 3600))
    if trace_file is not None:
        trace = load_trace_csv(trace_file)
        if len(trace) < seconds:
            raise TraceError(f"{trace_file}: the trace covers {len(trace)} s, fewer than the {seconds} s asked for")
    else:
        trace = generate_trace(
            workload, hours + TRACE_EXTRA_HOURS, seed, start=pd.Timestamp(DEFAULT_START_TS, unit="s", tz="UTC")
        )
    start_ts = int(trace.index[0].timestamp())
    twin = TwinJob(
        ClusterProfile.default(workload), ConfigSpace().maximum, job=job, seed=seed, start_ts=start_ts, failures=FAILURES
    )
    lake = Lake(settings.lake_dir)  # type: ignore[arg-type]  # filled by the settings' validator
    rates = trace.to_numpy(dtype=float)[:seconds]
    files: list[str] = []
    rows = 0
    for lo in range(0, seconds, 3600):
        frame = twin.run(rates[lo : lo + 3600])
        rows += len(frame)
        files.extend(str(p) for p in lake.write_raw(frame))
    save_job(settings.twin_dir, twin, trace)  # type: ignore[arg-type]
    return {"job": job, "start_ms": start_ts * 1000, "end_ms": twin.now * 1000, "rows": rows, "files": files}


def main(argv: list[str] | None = None) -> int:
    """``python -m jobs.simulate``: one line and exit code 2 on a known error (see :mod:`flinktune.entry`)."""
    return run_main("python -m jobs.simulate", _main, argv)


def _main(argv: list[str]) -> None:
    p = OneLineParser(prog="python -m jobs.simulate", description=__doc__.splitlines()[0])
    p.add_argument("--job", default="demo", help="job (FlinkDeployment) name")
    p.add_argument("--workload", default="ysb", choices=sorted(WORKLOADS), help="generated workload and built-in job")
    p.add_argument("--hours", type=float, default=6.0, help="hours to simulate")
    p.add_argument("--seed", type=int, default=7, help="random seed (trace and twin)")
    p.add_argument("--trace-file", default=None, help="CSV trace (timestamp,value or timestamp|value) instead of a generated one")
    a = p.parse_args(argv)
    print(json.dumps(run(job=a.job, workload=a.workload, hours=a.hours, seed=a.seed, trace_file=a.trace_file)))


if __name__ == "__main__":
    raise SystemExit(main())
