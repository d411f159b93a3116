"""Gather one job's report from the lake, the state store and the twin, write it, and log it to MLflow.

Use :func:`write_job_report` with a :class:`JobReport` (where the job's data is and what it is held
to, plain values from the settings; ``jobs.report`` builds it). On the twin the tuned hours are
replayed under the other policies over ``seeds`` seeds (:func:`comparison_for`), the replays kept
under ``<reports_dir>/.replays`` so a report written again on the same state replays nothing. MLflow
gets one short reachability check first (:func:`flinktune.report.tracking.tracking_unreachable`):
out of reach, the report is written without the MLflow logging and says so.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pandas as pd

from flinktune.config_space import default_space
from flinktune.lake import PROFILING_OBSERVATIONS, Lake
from flinktune.pricing import load_prices
from flinktune.report.counterfactual import COUNTERFACTUAL_POLICIES, Comparison, compare_on_same_load, same_load_from_twin
from flinktune.report.period import ReportInputs, tuned_start
from flinktune.report.quality import data_quality_from_lake
from flinktune.report.tracking import log_report, tracking_unreachable
from flinktune.report.writer import write_report
from flinktune.twin.rest_latency import measured_rest_p95_ms, target_warning

__all__ = ["REPLAY_CACHE", "JobReport", "Tracking", "comparison_for", "read_features", "write_job_report"]

log = logging.getLogger(__name__)

#: The folder under the reports folder that keeps the replays' figures.
REPLAY_CACHE = ".replays"


@dataclass(frozen=True)
class Tracking:
    """The MLflow a report is logged to, and the bound on each request to it."""

    uri: str
    artifact_root: str | Path
    request_timeout_s: float = 5.0
    retries: int = 1


@dataclass(frozen=True)
class JobReport:
    """One job's report: where its data is and what it is held to.

    ``cluster``: ``twin`` replays the same load, anything else is a real cluster (no counterfactual);
    ``seeds``: seeds of the same load (1: the run's own only, no money per month); ``open_store``:
    opens (or creates) the state store, called once the job's features are known to exist;
    ``tracking``: None writes the report without MLflow."""

    job: str
    lake_dir: Path
    twin_dir: Path
    reports_dir: Path
    latency_target_ms: float
    recovery_limit_s: float
    open_store: Callable[[], Any]
    forecast_horizon_s: int = 600
    cluster: str = "twin"
    seeds: int = 1
    tracking: Tracking | None = None


def read_features(lake_dir: Path, job: str) -> pd.DataFrame:
    """Curated, validated features_1m of one job (raises naming the path when there are none)."""
    lake = Lake(lake_dir)
    frames = lake.read_dataset("features_1m", job)
    if not frames:
        raise FileNotFoundError(
            f"no curated features for job {job!r} under {lake.curated_job_dir('features_1m', job)}; run the ETL (jobs.etl_features) first"
        )
    df = pd.concat(frames, ignore_index=True)
    df["window_start"] = pd.to_datetime(df["window_start"], utc=True)
    return df.sort_values("window_start").reset_index(drop=True)


def _profiling_observations(lake_dir: Path, job: str) -> pd.DataFrame | None:
    frames = Lake(lake_dir).read_dataset(PROFILING_OBSERVATIONS, job)
    return pd.concat(frames, ignore_index=True) if frames else None


def comparison_for(
    inputs: ReportInputs, spec: JobReport, policies: tuple[str, ...] = COUNTERFACTUAL_POLICIES
) -> tuple[Comparison | None, str]:
    """(the comparison on the same load, or None, and a note saying why there is none)."""
    from flinktune.twin.job_store import TWIN_FILE, job_dir, load_job
    from flinktune.twin.workload import WORKLOADS

    if spec.cluster != "twin":
        return None, (
            "This job runs on a real cluster: nothing can replay its hours under other policies, so the verdict "
            "judges latency against the target itself and cost against static's reservation."
        )
    if not (job_dir(spec.twin_dir, inputs.job) / TWIN_FILE).exists():
        return None, f"No twin for job {inputs.job!r} under {spec.twin_dir}: the same load cannot be replayed."
    start = tuned_start(inputs)
    if start is None:
        return None, "No decision was recorded, so there is no tuned period to compare."
    twin, trace = load_job(spec.twin_dir, inputs.job)
    end = int(min(twin.now, inputs.features["window_start"].max().timestamp() + 60))
    try:
        same = same_load_from_twin(
            twin,
            trace,
            int(start.timestamp()),
            end,
            policy=inputs.policy,
            profiling=_profiling_observations(spec.lake_dir, inputs.job),
        )
    except ValueError as exc:  # the report still says what happened, and why it has no counterfactual
        return None, f"No counterfactual: {exc}."
    # The workload names the generator Demeter's replayed forecaster trains on (a preceding day of it).
    workload = twin.profile.dataflow.name if twin.profile.dataflow.name in WORKLOADS else "ysb"
    cmp = compare_on_same_load(
        same,
        inputs.space,
        latency_target_ms=inputs.latency_target_ms,
        recovery_limit_s=spec.recovery_limit_s,
        prices=inputs.prices,
        policies=policies,
        workload=workload,
        seeds=spec.seeds,
        cache_dir=spec.reports_dir / REPLAY_CACHE / inputs.job,
    )
    return cmp, ""


def _policy(decisions: pd.DataFrame, given: str | None) -> str:
    """The policy a report judges: the one given, else the one that decided most (the guard only holds)."""
    if given:
        return given
    used = str(decisions["policy"].mode().iloc[0]) if len(decisions) else "flinktune"
    if used == "guard" and len(decisions):
        others = decisions[decisions["policy"] != "guard"]
        used = str(others["policy"].mode().iloc[0]) if len(others) else "flinktune"
    return used


def write_job_report(
    spec: JobReport,
    *,
    since_ms: int | None = None,
    policy: str | None = None,
    progress: Callable[[str], None] | None = None,
    warn: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """Write the report; ``{report, html, verdict, mlflow_run_id, mlflow}`` (``mlflow``: why it was not logged, or "").

    ``progress`` hears each step as it starts, ``warn`` a target below the latency at rest."""
    say = progress or (lambda step: log.info("%s", step))
    job = spec.job
    say(f"reading the curated features of {job} from {spec.lake_dir}")
    features = read_features(spec.lake_dir, job)  # first: a job without features is refused before the store is opened (created)
    warning = target_warning(spec.latency_target_ms, measured_rest_p95_ms(features), "its best minute in the lake")
    if warning:
        (warn or log.warning)(warning)
    store = spec.open_store()
    decisions = store.decisions(job)
    inputs = ReportInputs(
        job=job,
        features=features,
        decisions=decisions,
        forecasts=store.forecasts(job),
        latency_target_ms=spec.latency_target_ms,
        space=default_space(),
        since=pd.Timestamp(since_ms, unit="ms", tz="UTC") if since_ms is not None else None,
        prices=load_prices(),
        policy=_policy(decisions, policy),
        forecast_horizon_s=spec.forecast_horizon_s,
        data_quality=data_quality_from_lake(Lake(spec.lake_dir), job),
    )
    seeds = f" over {spec.seeds} seeds" if spec.seeds > 1 else ""
    say(
        f"replaying {', '.join(COUNTERFACTUAL_POLICIES)} on the tuned hours' load{seeds} (the twin only; replays "
        f"already kept under {spec.reports_dir / REPLAY_CACHE} are read back)"
    )
    comparison, note = comparison_for(inputs, spec)
    unreachable = "MLflow is not configured" if spec.tracking is None else ""
    if spec.tracking is not None:
        say("checking that MLflow answers")
        unreachable = tracking_unreachable(spec.tracking.uri, spec.tracking.request_timeout_s)
    say("writing the Markdown and HTML report with its plots")
    tracking_note = f"Not logged to MLflow: {unreachable}" if unreachable else ""
    path = write_report(
        replace(inputs, comparison=comparison, comparison_note=note, tracking_note=tracking_note), spec.reports_dir
    )
    summary = json.loads((path.parent / "summary.json").read_text())
    run_id, why = None, unreachable
    if spec.tracking is not None and not unreachable:
        say("logging the report to MLflow")
        t = spec.tracking
        run_id, why = log_report(
            path.parent,
            summary,
            job,
            tracking_uri=t.uri,
            artifact_root=t.artifact_root,
            request_timeout_s=t.request_timeout_s,
            retries=t.retries,
        )
    elif spec.tracking is not None:
        say(f"report written without the MLflow logging: {unreachable}")
        log.warning("report for %s written without the MLflow logging: %s", job, unreachable)
    return {
        "report": str(path.resolve()),
        "html": str((path.parent / "report.html").resolve()),
        "verdict": summary["verdict"]["headline"],
        "mlflow_run_id": run_id,
        "mlflow": why,
    }
