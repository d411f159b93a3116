"""Write the run report of one job (Markdown + HTML + PNG) from the validated lake and the state store.

On the twin (``FLINKTUNE_CLUSTER=twin``, the embedded default) the report replays static, the
operator autoscaler and Demeter over the tuned hours from the same state, trace and failures, on
``FLINKTUNE_REPORT_SEEDS`` seeds, and judges the run against static on that same load; on a real
cluster there is no counterfactual and the report says so (:mod:`flinktune.report.assemble`). The
report folder is logged to MLflow (experiment ``flinktune-report-<job>``) as artifacts when MLflow
answers a short check; otherwise the report is written without it and says so.

``python -m jobs.report --job demo`` prints ``{"report": "<path>", "html": "<path>", "verdict": "...", ...}``.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pandas as pd

from flinktune.decision.store import open_state_store
from flinktune.entry import OneLineParser, run_main
from flinktune.job_name import job_name
from flinktune.report import COUNTERFACTUAL_POLICIES, ReportInputs
from flinktune.report.assemble import JobReport, Tracking, write_job_report
from flinktune.report.assemble import comparison_for as _comparison_for
from flinktune.report.assemble import read_features as _read_features
from flinktune.report.spread import ReportSettings
from flinktune.settings import Settings, load_settings, read_group

__all__ = ["comparison_for", "job_report", "main", "read_features", "run"]


def job_report(settings: Settings, job: str, *, seeds: int | None = None) -> JobReport:
    """What ``job``'s report reads and is held to, from ``settings`` (``seeds``: default ``FLINKTUNE_REPORT_SEEDS``)."""
    from flinktune.backends.choice import load_backends

    t = settings.timeouts
    return JobReport(
        job=job,
        lake_dir=Path(str(settings.lake_dir)),
        twin_dir=Path(str(settings.twin_dir)),
        reports_dir=Path(str(settings.reports_dir)),
        latency_target_ms=settings.latency_target_ms,
        recovery_limit_s=settings.recovery_limit_s,
        open_store=lambda: open_state_store(settings),
        forecast_horizon_s=settings.forecast_horizon_s,
        cluster=load_backends().cluster,
        seeds=read_group(ReportSettings).seeds if seeds is None else seeds,
        tracking=Tracking(
            str(settings.mlflow_tracking_uri), str(settings.mlflow_artifact_root), t.mlflow_request_s, t.mlflow_retries
        ),
    )


def read_features(settings: Settings, job: str) -> pd.DataFrame:
    """Curated, validated features_1m of one job (raises naming the path when there are none)."""
    return _read_features(Path(str(settings.lake_dir)), job)


def comparison_for(
    inputs: ReportInputs, settings: Settings, policies: tuple[str, ...] = COUNTERFACTUAL_POLICIES
) -> tuple[object, str]:
    """(the comparison on the same load, or None, and a note saying why there is none)."""
    return _comparison_for(inputs, job_report(settings, inputs.job), policies)


def run(
    *,
    job: str,
    since_ms: int | None = None,
    settings: Settings | None = None,
    policy: str | None = None,
    progress: Callable[[str], None] | None = None,
    warn: Callable[[str], None] | None = None,
    seeds: int | None = None,
) -> dict:
    """Write the report; ``progress`` hears each step as it starts, ``warn`` a target below the latency at rest.

    Returns ``{report, html, verdict, mlflow_run_id, mlflow}``: ``mlflow`` says why the report was
    not logged there ("" when it was)."""
    job = job_name(job)  # before it reaches any path, model name or API call
    spec = job_report(settings or load_settings(), job, seeds=seeds)
    return write_job_report(spec, since_ms=since_ms, policy=policy, progress=progress, warn=warn)


def main(argv: list[str] | None = None) -> int:
    """``python -m jobs.report``: one line and exit code 2 on a known error (see :mod:`flinktune.entry`)."""
    return run_main("python -m jobs.report", _main, argv)


def _main(argv: list[str]) -> None:
    p = OneLineParser(prog="python -m jobs.report", description=__doc__)
    p.add_argument("--job", required=True)
    p.add_argument("--since-ms", type=int, default=None)
    a = p.parse_args(argv)
    print(json.dumps(run(job=a.job, since_ms=a.since_ms)))


if __name__ == "__main__":
    raise SystemExit(main())
