"""``flinktune rehearse --minutes N``: the production topology on this machine, run unattended (:mod:`flinktune.rehearsal`)."""

from __future__ import annotations

import json
import time
from pathlib import Path

import typer

from flinktune.cli.options import fail
from flinktune.quantities import LATENCY_MS, QuantityError, check, cron, finite

__all__ = ["rehearse"]


def rehearse(
    minutes: float = typer.Option(20.0, min=1.0, max=240.0, help="Length of the rate plan (the stack's start not counted)."),
    var_dir: Path | None = typer.Option(
        None, help="Home of the whole run (lake, state, logs, Flink and Airflow homes); default var/rehearsal-<time>."
    ),
    policy: str = typer.Option("ds2", help="Policy of both jobs (fleet file); one that needs no trained model acts at once."),
    latency_target_ms: float = typer.Option(3000.0, help="p95 latency target of both jobs, ms."),
    ingest_every_s: int = typer.Option(20, min=10, help="flinktune_ingest's cadence in the rehearsal, s."),
    decide_cron: str = typer.Option("* * * * *", help="flinktune_decide's schedule in the rehearsal (cron, UTC)."),
    retrain_cron: str = typer.Option("*/10 * * * *", help="flinktune_train's schedule in the rehearsal (cron, UTC)."),
    drain_timeout_s: float = typer.Option(
        900.0,
        min=0.0,
        help="At the end, how long the decide run in flight, then the ingest run (its ETL included), may each take to finish, s.",
    ),
    jar: Path | None = typer.Option(
        None, help="The benchmark jar (default var/localflink/flinkjob.jar; scripts/setup_local_flink.sh)."
    ),
) -> None:
    """Rehearse production here: real Flink (two jobs), Prometheus, Airflow 3 with Celery workers,
    MLflow on PostgreSQL, Spark standalone; the DAGs on short schedules; a verdict per change.

    Needs PostgreSQL (127.0.0.1:5432, trust, user postgres), Redis (127.0.0.1:6379), the Debian
    prometheus binary, Java 17 and scripts/setup_local_flink.sh done. Ctrl-C stops everything.
    """
    from flinktune.localflink.benchjob import BENCH_JAR
    from flinktune.policies import POLICY_NAMES
    from flinktune.rehearsal import RehearsalOptions
    from flinktune.rehearsal import rehearse as run
    from flinktune.rehearsal.servers import StackError

    if policy not in POLICY_NAMES:
        fail(f"--policy {policy!r}: unknown; known: {', '.join(POLICY_NAMES)}")
    # Every option is checked here, before the stack's minutes of start-up.
    try:
        check(LATENCY_MS, latency_target_ms, "--latency-target-ms")
        cron(decide_cron, "--decide-cron")
        cron(retrain_cron, "--retrain-cron")
        finite(drain_timeout_s, "--drain-timeout-s")
        finite(minutes, "--minutes")
    except QuantityError as exc:
        fail(str(exc))
    jar = jar or BENCH_JAR
    if not jar.is_file():
        fail(f"the benchmark jar {jar} is missing: run scripts/setup_local_flink.sh")
    home = var_dir or Path("var") / f"rehearsal-{time.strftime('%Y%m%d-%H%M%S')}"
    opts = RehearsalOptions(
        minutes=minutes,
        var_dir=home,
        jar=jar,
        policy=policy,
        latency_target_ms=latency_target_ms,
        ingest_every_s=ingest_every_s,
        decide_cron=decide_cron,
        retrain_cron=retrain_cron,
        drain_timeout_s=drain_timeout_s,
    )
    try:
        summary = run(opts, log=lambda line: typer.echo(line))
    except StackError as exc:
        fail(str(exc))
    typer.echo(
        json.dumps(
            {
                name: {k: job[k] for k in ("decisions", "changes", "latency_over_target_fraction")}
                for name, job in summary.get("jobs", {}).items()
            },
            indent=2,
            default=str,
        )
    )
    if summary.get("left_running"):
        fail(f"processes left running after the stop: {summary['left_running']}")
