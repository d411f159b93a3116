"""The pipeline's commands: ``flinktune demo`` (the whole pipeline on the twin) and the single steps
``decide``, ``report`` and ``replay`` against an existing state folder.

:data:`COMMANDS` lists them in help order; :mod:`flinktune.cli.main` registers them on the app.
"""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from flinktune.cli.options import (
    DEFAULT_VAR_DIR,
    DEMO_MARKER,
    DEMO_SETTINGS,
    DEMO_VAR_DIR,
    VAR_DIR_HELP,
    PolicyName,
    Workload,
    checked_job,
    fail,
    nothing_left_on_refusal,
    out_dir,
    state_dir,
    state_settings,
)

if TYPE_CHECKING:
    from flinktune.fleet.demo_fleet import DemoJob

__all__ = ["COMMANDS", "decide", "demo", "replay", "report"]


def _warn_below_rest(latency_target_ms: float, profile: str | None, workload: str) -> None:
    """One line on stderr when the target is below the twin job's p95 at rest on the largest configuration."""
    from flinktune.config_space import default_space
    from flinktune.replay.runner import resolve_profile
    from flinktune.twin.rest_latency import rest_p95_ms, target_warning

    try:
        prof = resolve_profile(profile, workload)
    except (FileNotFoundError, ValueError):
        return  # the command itself refuses a bad profile, naming it
    rest = rest_p95_ms(prof, default_space().maximum)
    warning = target_warning(latency_target_ms, rest, f"the {profile or workload} twin on the largest configuration")
    if warning:
        typer.secho(warning, fg=typer.colors.YELLOW, err=True)


def _fresh_demo_dir(var_dir: Path) -> None:
    """Start the demo from a clean folder, but never delete a folder the demo did not create."""
    if var_dir.exists() and any(var_dir.iterdir()):
        if not (var_dir / DEMO_MARKER).exists():
            fail(f"{var_dir} exists and was not created by the demo; choose another --var-dir or remove it yourself")
        shutil.rmtree(var_dir)
    var_dir.mkdir(parents=True, exist_ok=True)
    (var_dir / DEMO_MARKER).write_text("created by `flinktune demo`; deleted and recreated on the next demo run\n")


def demo(
    workload: Workload = typer.Option(Workload.ysb, help="Built-in trace shape for the twin (ignored with --trace-file)."),
    trace_file: Path | None = typer.Option(
        None, help="CSV trace (timestamp,value or timestamp|value) instead of a built-in one."
    ),
    history_hours: float = typer.Option(
        6.0,
        min=3.0,
        max=24.0,
        help="Hours of history the models learn from (at least 3: the forecaster trains on 100 minutes and backtests on the rest).",
    ),
    tuned_hours: float = typer.Option(4.0, min=0.5, max=18.0, help="Hours the tuner then runs the job for."),
    policy: PolicyName = typer.Option(PolicyName.flinktune, help="Policy that decides during the tuned hours."),
    seed: int = typer.Option(7, help="Seed of the trace, the twin's noise and failures."),
    latency_target_ms: float = typer.Option(
        600.0,
        help="The demo job's p95 latency target, ms: the tuner sizes the job to stay under it at the least cost "
        "(600: about 1.5 x the twin job's p95 at rest on the full-size configuration).",
    ),
    job: str = typer.Option(
        "demo", help="Job name (lower-case letters, digits and dashes); with --jobs N, the prefix of the jobs' names."
    ),
    var_dir: Path = typer.Option(DEMO_VAR_DIR, help="State folder of the demo (recreated on every run)."),
    jobs: int = typer.Option(
        1,
        "--jobs",
        help="Twin jobs to run as one fleet (1 to 6), each of another kind and load (ysb and tsw at 1, 0.6 and 0.8 x "
        "their rates, the first of --workload's kind), each with its report, and a fleet overview linking them.",
    ),
) -> None:
    """Run the whole pipeline on the twin and print the report's path (with --jobs N: each job's and the fleet overview's)."""
    from flinktune.quantities import LATENCY_MS, QuantityError, check, finite

    try:  # before the demo folder is recreated
        check(LATENCY_MS, latency_target_ms, "--latency-target-ms")
        finite(history_hours, "--history-hours")
        finite(tuned_hours, "--tuned-hours")
    except QuantityError as exc:
        fail(str(exc))
    job = checked_job(job)
    fleet = None
    if jobs != 1:
        from flinktune.fleet.demo_fleet import demo_jobs

        if trace_file is not None:
            fail("--trace-file runs one job; with --jobs N each job replays its kind's built-in trace at its own load")
        try:
            fleet = demo_jobs(jobs, prefix=job, seed=seed, first_kind=workload.value)
        except ValueError as exc:
            fail(str(exc))
    if trace_file is not None:
        from flinktune.twin.workload import TraceError, load_trace_csv

        try:
            trace = load_trace_csv(trace_file)
        except (TraceError, OSError) as exc:
            fail(str(exc))
        need = (history_hours + tuned_hours) * 3600 + 600
        have = (trace.index[-1] - trace.index[0]).total_seconds()
        if have < need:
            fail(
                f"{trace_file}: trace covers {have / 3600:.1f} h but the demo needs {need / 3600:.1f} h (history + tuned + 10 min)"
            )
        trace_file = trace_file.resolve()

    for kind in dict.fromkeys([workload.value] if fleet is None else [j.kind for j in fleet]):
        _warn_below_rest(latency_target_ms, None, kind)
    var_dir = var_dir.resolve()
    _fresh_demo_dir(var_dir)
    (var_dir / DEMO_SETTINGS).write_text(json.dumps({"latency_target_ms": latency_target_ms}) + "\n")
    from flinktune.airflow_local.runner import LocalPipeline
    from flinktune.decision.store import open_state_store

    t0 = time.monotonic()
    from flinktune.settings import load_settings

    # The twin is a simulation: the demo switches its job to act on it, as an operator would with
    # `flinktune fleet act JOB` on a real cluster (every job starts in advice).
    store = open_state_store(load_settings(var_dir=var_dir))
    for name in [job] if fleet is None else [j.name for j in fleet]:
        store.set_mode(name, "act", by="flinktune demo (the twin is a simulation)")

    t0 = time.monotonic()
    # One tick per decision interval (what the decide job runs the twin for), whatever it is set to.
    ticks = max(1, int(round(tuned_hours * 3600 / load_settings(var_dir=var_dir).decision_interval_s)))
    env = {"FLINKTUNE_VAR_DIR": str(var_dir), "FLINKTUNE_LATENCY_TARGET_MS": f"{latency_target_ms:g}"}
    if fleet is not None:
        _fleet_demo(
            var_dir,
            fleet,
            history_hours=history_hours,
            tuned_hours=tuned_hours,
            policy=policy.value,
            latency_target_ms=latency_target_ms,
            ticks=ticks,
            env=env,
            started=t0,
        )
        return
    conf_common: dict[str, Any] = {"job": job}
    ingest = (
        "flinktune_ingest",
        {
            **conf_common,
            "workload": workload.value,
            "hours": history_hours,
            "seed": seed,
            "trace_file": str(trace_file) if trace_file else "",
        },
    )
    learn_and_decide = [
        ("flinktune_train", conf_common),
        ("flinktune_decide", {**conf_common, "policy": policy.value, "dry_run": False, "ticks": ticks}),
    ]
    try:
        # One child runs all five DAG runs: Airflow, the models' libraries and Spark start once.
        with LocalPipeline(var_dir, env=env) as pipeline:
            first = pipeline.run([ingest, *learn_and_decide])
            # The decision task wrote the tuned period's raw metrics: curate just that period, then report.
            # (the ingest's `collect` task, mapped over the fleet: the demo's one job)
            tuned_from = int(first[0]["returns"]["collect"]["end_ms"])
            pipeline.run(
                [
                    ("flinktune_ingest", {**conf_common, "metrics_source": "lake", "start_ms": tuned_from}),
                    ("flinktune_report", conf_common),
                ]
            )
    except Exception as exc:
        fail(str(exc))
    reports = sorted(Path(var_dir, "reports").glob("*/report.md"), key=lambda p: p.stat().st_mtime)
    if not reports:
        fail(f"the pipeline finished but wrote no report under {var_dir / 'reports'}")
    summary = json.loads((reports[-1].parent / "summary.json").read_text())
    tuned = summary.get("tuned") or summary
    typer.echo(
        f"demo finished in {time.monotonic() - t0:.0f} s; tuned {tuned['hours']:.1f} h: {tuned['reconfigurations']} "
        f"reconfigurations, CPU {tuned['cpu_vs_static']:.2f} x and memory {tuned['memory_vs_static']:.2f} x static max"
    )
    typer.echo(f"report: {reports[-1]}")
    typer.echo(f"html report: {reports[-1].parent / 'report.html'}")
    # The last line is the verdict, a miss included: what a newcomer reads first.
    typer.echo(f"verdict: {summary['verdict']['headline']}")


def _fleet_demo(
    var_dir: Path,
    fleet: list[DemoJob],
    *,
    history_hours: float,
    tuned_hours: float,
    policy: str,
    latency_target_ms: float,
    ticks: int,
    env: dict[str, str],
    started: float,
) -> None:
    """``demo --jobs N``: the fleet through the DAGs, then the overview; prints each job's verdict and report, the overview last."""
    from flinktune.fleet.demo_fleet import run_fleet_demo
    from flinktune.report.fleet_overview import FleetJob, write_fleet_overview

    try:
        run = run_fleet_demo(
            var_dir,
            fleet,
            history_hours=history_hours,
            tuned_hours=tuned_hours,
            policy=policy,
            latency_target_ms=latency_target_ms,
            ticks=ticks,
            env=env,
        )
        pages = [FleetJob(j.name, j.kind, j.load, Path(run.reports[j.name]["report"])) for j in fleet]
        # Beside the jobs' report folders, so that its links are short and the folder moves as one.
        overview = write_fleet_overview(
            pages, pages[0].report.parent.parent, title=f"flinktune demo: {len(fleet)} twin jobs, {tuned_hours:g} h tuned each"
        )
    except Exception as exc:
        fail(str(exc))
    typer.echo(f"demo finished in {time.monotonic() - started:.0f} s: {len(fleet)} jobs, {tuned_hours:.1f} h tuned each")
    for j in fleet:
        page = run.reports[j.name]
        typer.echo(f"{j.name} ({j.kind} at {j.load:g} x its rates): {page['verdict']}; html report: {page['html']}")
    typer.echo(f"fleet overview: {overview}")


def decide(
    job: str = typer.Option(..., help="Job name."),
    ticks: int = typer.Option(1, min=1, max=500, help="Decision intervals to run (the twin advances one interval per tick)."),
    policy: PolicyName = typer.Option(PolicyName.flinktune),
    apply: bool = typer.Option(
        False,
        "--apply",
        help="Apply the decisions if the job's mode is act (`flinktune fleet act JOB`); default: record them as advice.",
    ),
    dry_run: bool = typer.Option(False, "--dry-run", hidden=True, help="The default (advice only); accepted for older scripts."),
    var_dir: Path | None = typer.Option(None, help=VAR_DIR_HELP),
) -> None:
    """Run the decision task for a job and record its decisions; nothing changes without --apply on a job in act mode."""
    if apply and dry_run:
        fail("give --apply or --dry-run, not both")
    job = checked_job(job)
    folder = state_dir(var_dir)
    from flinktune.runs.decide import decide as run_decide
    from flinktune.settings import load_settings

    with nothing_left_on_refusal(folder):
        settings = load_settings(var_dir=folder, **state_settings(folder))
        result = run_decide(job=job, ticks=ticks, policy=policy.value, apply=apply, settings=settings)
    typer.echo(json.dumps(result, indent=2))


def report(
    job: str = typer.Option(..., help="Job name."),
    var_dir: Path | None = typer.Option(None, help=VAR_DIR_HELP),
) -> None:
    """Write the report of a job: progress as it goes, then the verdict and the Markdown and HTML paths."""
    job = checked_job(job)
    folder = state_dir(var_dir)
    from flinktune.settings import load_settings
    from jobs.report import run

    started = time.monotonic()

    def progress(step: str) -> None:
        typer.echo(f"[{time.monotonic() - started:4.0f} s] {step}")

    with nothing_left_on_refusal(folder):
        settings = load_settings(var_dir=folder, **state_settings(folder))
        result = run(job=job, settings=settings, progress=progress, warn=_warn)
    typer.echo(f"report: {result['report']}")
    typer.echo(f"html report: {result['html']}")
    typer.echo(f"verdict: {result['verdict']}")


def _warn(line: str) -> None:
    typer.secho(line, fg=typer.colors.YELLOW, err=True)


def replay(
    trace: str = typer.Option("ysb", help="Built-in trace (ysb, tsw) or a CSV trace file."),
    policies: str = typer.Option("all", help="Comma-separated policy names, or 'all'."),
    hours: float = typer.Option(18.0, help="Hours of trace to replay (0.5 to 48)."),
    failures: str = typer.Option("every:45m", help="Failure schedule: none, every:<N>m, random:<N>/h."),
    seed: int = typer.Option(7, help="Seed of the trace, noise and failures."),
    out: Path | None = typer.Option(None, help="Folder for the table (Markdown, JSON) and plots; default <var-dir>/replay."),
    forecaster: str = typer.Option(
        "peak",
        help="Forecaster of the model-based policies: peak (the direct peak model, default), naive (seasonal naive, instant) or darts (a small TiDE).",
    ),
    workers: int = typer.Option(2, min=1, max=8, help="Policies replayed in parallel processes."),
    profile: str | None = typer.Option(
        None,
        help="Cluster profile: ysb, tsw, ads (calibrated on Demeter's real ADS runs) or a profile YAML (default: the trace's built-in one).",
    ),
    latency_target_ms: float = typer.Option(
        1000.0,
        help="The policies' and the guard's latency goal, ms (ads: its idle latency is about 1.1 s; Demeter's boundary there is 2369 ms).",
    ),
    history_hours: float = typer.Option(
        0.0,
        min=0.0,
        help="Trace files only: the file's first hours are the forecasters' history (fitted and forecast from), the --hours after them are replayed; 0 fits them on a synthetic ysb day.",
    ),
    watch_every_s: int = typer.Option(
        60, min=0, help="Seconds between the watch's checks that let flinktune decide early when the backlog grows (0: off)."
    ),
    policy_option: list[str] = typer.Option(
        [],
        metavar="POLICY.ARG=NUMBER",
        help="POLICY.ARGUMENT=NUMBER, repeatable: sets a baseline to its published setting, e.g. "
        "reactive.target_utilization=0.35 (Demeter's measured HPA; at the default 70 % it cannot scale on the ads profile).",
    ),
    var_dir: Path = typer.Option(
        DEFAULT_VAR_DIR, help="State folder; the results go under <var-dir>/replay unless --out says otherwise."
    ),
) -> None:
    """Replay every policy on the same trace, seed and failures; write the comparison table."""
    from flinktune.quantities import LATENCY_MS, QuantityError, check, finite
    from flinktune.replay import cli_replay
    from flinktune.replay.policy_options import parse_policy_options

    try:
        # Before the warning below, which would compare a NaN target with the latency at rest.
        check(LATENCY_MS, latency_target_ms, "--latency-target-ms")
        if not 0.5 <= finite(hours, "--hours") <= 48.0:
            fail(f"--hours {hours:g}: replay 0.5 to 48 hours")
        finite(history_hours, "--history-hours")
    except QuantityError as exc:
        fail(str(exc))
    out = out_dir(out, "--out") if out is not None else out_dir(var_dir / "replay", "--var-dir")
    _warn_below_rest(latency_target_ms, profile, trace if trace in ("ysb", "tsw") else "ysb")
    try:
        result = cli_replay(
            trace,
            policies,
            hours,
            failures,
            seed,
            out,
            forecaster=forecaster,
            workers=workers,
            profile=profile,
            latency_target_ms=latency_target_ms,
            history_hours=history_hours,
            watch_every_s=watch_every_s,
            policy_options=parse_policy_options(policy_option),
        )
    except (FileNotFoundError, ValueError) as exc:
        fail(str(exc))
    typer.echo(json.dumps(result, default=str, indent=2) if not isinstance(result, str) else result)


COMMANDS = (demo, decide, report, replay)
