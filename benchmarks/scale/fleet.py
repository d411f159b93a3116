"""One decision cycle for a fleet of N twin jobs: wall time, decisions per second, peak memory.

Run: ``.venv/bin/python -m benchmarks.scale.fleet --jobs 1000 [--kinds ysb,tsw] [--seed 7] [--no-share]
[--decisions-out FILE] [--agree-with FILE] [--out FILE]``.

What is timed is what the fleet's decide step does for every job, one after another in one process,
through the production path: :func:`flinktune.fleet.for_each_job` over a fleet of N jobs, and for
each job :func:`flinktune.decision.loop.build_decision_loop` (its memory restored from a SQLite
state store shared by the fleet, as on a worker) and one ``step()``: fetch the last interval's
metrics from the job's twin, evaluate, forecast, plan with the flinktune policy and its surrogate,
guard, realize on the twin, store. Jobs alternate over ``--kinds`` (built-in twin profiles) and
their rates are the kind's trace scaled by a seeded factor in [0.5, 1.5].

Set-up is reported, not timed with the cycle: per kind, one forecaster fitted on a preceding day of
that kind's trace and one surrogate bootstrapped from twin profiling (jobs of a kind share both:
the cross-job transfer the fleet makes possible); per job, a twin that has run one decision
interval. Profile decisions are recorded, not run: on a real fleet the profiling DAG carries them
out, as on Kubernetes. Loading per-job champions from MLflow is not part of this cycle.

Profiling acquisitions are shared by default (jobs of one kind at planned rates in one 2.5 % cell
run one qLogNEHVI, :mod:`models.surrogate.shared_acquisition`); ``--no-share`` runs one per profile
decision. To measure that sharing keeps the decisions: run once with ``--no-share --decisions-out
A.json`` and once with ``--agree-with A.json``. The cycle's wall time and its process CPU time
(user + system) are both reported: on a shared machine the wall time grows with the neighbours' load.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import resource
import sys
import tempfile
import time
import warnings
from collections import Counter
from pathlib import Path

import numpy as np

__all__ = ["main", "run_cycle"]


def _cpu_s() -> float:
    """User + system CPU seconds of this process so far (every thread): the figure a shared machine cannot inflate."""
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def agreement(a: dict[str, list], b: dict[str, list]) -> dict:
    """How many jobs decided alike in two runs' ``decisions``: all of it, and profile decisions' picks as sets."""
    common = sorted(set(a) & set(b))
    same = sum(a[j] == b[j] for j in common)
    prof = [j for j in common if a[j][0] == "profile" and b[j][0] == "profile"]
    same_set = sum(sorted(map(json.dumps, a[j][2])) == sorted(map(json.dumps, b[j][2])) for j in prof)
    return {"jobs": len(common), "identical": same, "profile_both": len(prof), "profile_same_set": same_set}


def _rss_mib() -> float:
    """Peak resident memory of this process so far, MiB (Linux reports KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def _digest(decision) -> list:
    """What a decision chose, comparable across runs: action, target and profiling configurations."""
    target = decision.target.to_dict() if decision.target is not None else None
    return [decision.action.value, target, [c.to_dict() for c in decision.profile_configs]]


def run_cycle(
    n_jobs: int,
    kinds: list[str],
    seed: int,
    state_dir: Path,
    *,
    forecaster: str = "peak",
    progress: bool = True,
    share: bool = True,
) -> dict:
    """Set up ``n_jobs`` twin jobs and time one decision cycle over them; the figures as a dict.

    ``share``: jobs of one kind asking for profiling at rates in one 2.5 % cell share one
    acquisition (``models.surrogate.shared_acquisition``); False runs one per profile decision.
    The dict's ``decisions`` maps each job to :func:`_digest` of its decision.
    """
    from flinktune.clock import ManualClock
    from flinktune.config_space import ConfigSpace
    from flinktune.decision.loop import LoopSettings, build_decision_loop
    from flinktune.decision.store import SqliteStateStore
    from flinktune.fleet import Fleet, FleetEntry, JobSettings, for_each_job
    from flinktune.policies import make_policy
    from flinktune.replay.harness import ReplaySettings, prepare_replay
    from flinktune.replay.models import TraceForecast
    from flinktune.twin.backend import twin_backend
    from flinktune.twin.profile import ClusterProfile
    from flinktune.twin.simulator import TwinJob
    from flinktune.twin.workload import generate_trace
    from models.surrogate.shared_acquisition import sharing_acquisitions

    t0 = time.perf_counter()
    space = ConfigSpace()
    settings = ReplaySettings(seed=seed, forecaster=forecaster)
    interval = 300  # the flinktune policy's cadence
    per_kind = {}
    for kind in kinds:
        trace = generate_trace(kind, 2.0, seed)
        rig = prepare_replay(
            "flinktune",
            trace,
            ClusterProfile.default(kind),
            space,
            ReplaySettings(workload=kind, seed=seed, forecaster=forecaster),
        )
        per_kind[kind] = (trace, rig)
    models_s = time.perf_counter() - t0
    rng = np.random.default_rng(seed)
    jobs, rigs = [], {}
    for i in range(n_jobs):
        kind = kinds[i % len(kinds)]
        trace, rig = per_kind[kind]
        scaled = trace * float(rng.uniform(0.5, 1.5))
        name = f"{kind}-{i:05d}"
        twin = TwinJob(
            rig.twin.profile,
            space.maximum,
            job=name,
            seed=seed + i,
            start_ts=int(trace.index[0].timestamp()),
            failures="none",
            retain_s=interval + 60,
        )
        twin.run(scaled.to_numpy(dtype=float)[: 2 * interval])
        rigs[name] = (twin, scaled, rig)
        jobs.append(FleetEntry(name, "benchmark", settings=JobSettings(name=name, kind=kind)))
    setup_s = time.perf_counter() - t0
    rss_setup = _rss_mib()
    store = SqliteStateStore(state_dir / "fleet.db")
    done: Counter = Counter()
    chosen: dict[str, list] = {}

    def decide(job: JobSettings):
        twin, scaled, rig = rigs[job.name]
        clock = ManualClock(twin.now)
        assert rig.models is not None  # prepare_replay gives the flinktune policy its models
        loop = build_decision_loop(
            twin_backend(twin, clock, job=job.name),
            LoopSettings(job.name, job.latency_target_ms, job.recovery_limit_s, window_s=interval, max_staleness_s=interval),
            policy=make_policy(job.policy, space, confidence=settings.confidence),
            space=space,
            store=store,
            models=rig.models,
            forecaster=TraceForecast(rig.models, scaled, settings.forecast_horizon_s),
        )
        out = loop.step()
        done[out.decision.action.value] += 1
        chosen[job.name] = _digest(out.decision)
        if progress and sum(done.values()) % 100 == 0:
            print(f"  {sum(done.values())}/{n_jobs} decided ({time.perf_counter() - start:.1f} s)", file=sys.stderr, flush=True)
        return out.decision.action.value

    with warnings.catch_warnings(), sharing_acquisitions() if share else contextlib.nullcontext() as shared:
        warnings.simplefilter("ignore")
        cpu0 = _cpu_s()
        start = time.perf_counter()
        outcomes = for_each_job(Fleet(tuple(jobs)), decide)
        cycle_s = time.perf_counter() - start
        cycle_cpu_s = _cpu_s() - cpu0
    failed = [o for o in outcomes if o.status != "done"]
    per_job = np.array([o.seconds for o in outcomes])
    return {
        "jobs": n_jobs,
        "kinds": kinds,
        "seed": seed,
        "forecaster": forecaster,
        "models_setup_s": round(models_s, 1),
        "setup_s": round(setup_s, 1),
        "cycle_s": round(cycle_s, 2),
        "cycle_cpu_s": round(cycle_cpu_s, 2),
        "decisions_per_s": round(n_jobs / cycle_s, 2),
        "shared_acquisitions": share,
        "acquisitions_run": shared.computed if shared else done["profile"],
        "acquisitions_shared": shared.shared if shared else 0,
        "per_job_ms_median": round(float(np.median(per_job)) * 1000, 1),
        "per_job_ms_p95": round(float(np.percentile(per_job, 95)) * 1000, 1),
        "peak_rss_mib_after_setup": round(rss_setup, 0),
        "peak_rss_mib": round(_rss_mib(), 0),
        "actions": dict(done),
        "failed": len(failed),
        "first_failure": failed[0].message if failed else "",
        "decisions": chosen,
    }


def _markdown(r: dict, command: str) -> str:
    """The result table as Markdown (for docs/results/fleet.md)."""
    agree = r.get("agreement")
    lines = [
        "| jobs | acquisitions | cycle wall | cycle CPU (user+sys) | decisions / s | per job, median | per job, p95 "
        "| peak memory | set-up (not timed) | actions | failed |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
        f"| {r['jobs']} | {'shared' if r['shared_acquisitions'] else 'one per job'}: {r['acquisitions_run']} run, "
        f"{r['acquisitions_shared']} shared | {r['cycle_s']:.1f} s | {r['cycle_cpu_s']:.1f} s | {r['decisions_per_s']:.1f} "
        f"| {r['per_job_ms_median']:.0f} ms | {r['per_job_ms_p95']:.0f} ms | {r['peak_rss_mib'] / 1024:.2f} GiB "
        f"| {r['setup_s']:.0f} s | {', '.join(f'{k} {v}' for k, v in sorted(r['actions'].items()))} | {r['failed']} |",
    ]
    if agree:
        lines += [
            "",
            f"Against `{agree['against']}`: {agree['identical']} of {agree['jobs']} jobs decided identically; of "
            f"{agree['profile_both']} jobs that asked for profiling in both, {agree['profile_same_set']} picked the same set.",
        ]
    return "\n".join([f"Command: `{command}`. Method: `benchmarks/scale/fleet.py` docstring.", "", *lines, ""])


def main(argv: list[str] | None = None) -> dict:
    p = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    p.add_argument("--jobs", type=int, default=100, help="fleet size (1-100000)")
    p.add_argument("--kinds", default="ysb,tsw", help="comma-separated built-in twin kinds the jobs alternate over")
    p.add_argument("--seed", type=int, default=7)
    p.add_argument(
        "--forecaster", default="peak", choices=["peak", "naive"], help="per-kind forecaster (peak: the replay's champion)"
    )
    p.add_argument("--no-share", action="store_true", help="one profiling acquisition per profile decision (the unbatched path)")
    p.add_argument("--decisions-out", type=Path, default=None, help="write every job's decision (JSON) here")
    p.add_argument(
        "--agree-with", type=Path, default=None, help="a --decisions-out file of another run: count the jobs decided alike"
    )
    p.add_argument("--out", type=Path, default=None, help="write the Markdown table here (to paste into docs/results/fleet.md)")
    a = p.parse_args(argv)
    kinds = [k.strip() for k in a.kinds.split(",") if k.strip()]
    if not 1 <= a.jobs <= 100_000:
        p.error(f"--jobs must be between 1 and 100000, got {a.jobs}")
    bad = [k for k in kinds if k not in ("ysb", "tsw")]
    if not kinds or bad:
        p.error(f"--kinds takes ysb and/or tsw, got {a.kinds!r}")
    other = None
    if a.agree_with is not None:
        try:
            other = json.loads(a.agree_with.read_text())
        except (OSError, ValueError) as exc:
            p.error(f"--agree-with {a.agree_with}: not a readable decisions file ({exc})")
    with tempfile.TemporaryDirectory(prefix="flinktune-fleet-") as tmp:
        r = run_cycle(a.jobs, kinds, a.seed, Path(tmp), forecaster=a.forecaster, share=not a.no_share)
    decisions = r.pop("decisions")
    if other is not None:
        r["agreement"] = {"against": str(a.agree_with), **agreement(decisions, other)}
    print(json.dumps(r))
    if a.decisions_out is not None:
        a.decisions_out.write_text(json.dumps(decisions))
    if a.out is not None:
        a.out.parent.mkdir(parents=True, exist_ok=True)
        cmd = " ".join(["python -m benchmarks.scale.fleet", *(argv if argv is not None else sys.argv[1:])])
        a.out.write_text(_markdown(r, cmd))
    return r


if __name__ == "__main__":
    main()
