"""Write the run report of one job (Markdown + HTML + PNG) from the validated lake and the state store.

On the twin (``FLINKTUNE_CLUSTER=twin``, the embedded default) the report replays static, the
operator autoscaler and Demeter over the tuned hours from the same state, trace and failures
(:mod:`flinktune.report.counterfactual`) and judges the run against static on that same load. On a
real cluster there is no counterfactual and the report says so. The report folder is logged to
MLflow (experiment ``flinktune-report-<job>``) as artifacts.

``python -m jobs.report --job demo`` prints ``{"report": "<path>", "html": "<path>", "verdict": "..."}``.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import pandas as pd

from flinktune.config_space import default_space
from flinktune.decision.store import open_state_store
from flinktune.entry import OneLineParser, run_main
from flinktune.job_name import job_name
from flinktune.lake import PROFILING_OBSERVATIONS, Lake
from flinktune.pricing import load_prices
from flinktune.report import COUNTERFACTUAL_POLICIES, ReportInputs, compare_on_same_load, same_load_from_twin, write_report
from flinktune.report.period import tuned_start
from flinktune.report.quality import data_quality_from_lake
from flinktune.settings import Settings, load_settings
from flinktune.twin.rest_latency import measured_rest_p95_ms, target_warning

__all__ = ["comparison_for", "main", "read_features", "run"]

log = logging.getLogger(__name__)


def read_features(settings: Settings, job: str) -> pd.DataFrame:
    """Curated, validated features_1m of one job (raises naming the path when there are none)."""
    lake = Lake(settings.lake_dir)
    frames = lake.read_dataset("features_1m", job)
    if not frames:
        raise FileNotFoundError(
            f"no curated features for job {job!r} under {lake.curated_job_dir('features_1m', job)}; run the ETL (jobs.etl_features) first"
        )
    df = pd.concat(frames, ignore_index=True)
    df["window_start"] = pd.to_datetime(df["window_start"], utc=True)
    return df.sort_values("window_start").reset_index(drop=True)


def _profiling_observations(settings: Settings, job: str) -> pd.DataFrame | None:
    frames = Lake(settings.lake_dir).read_dataset(PROFILING_OBSERVATIONS, job)
    return pd.concat(frames, ignore_index=True) if frames else None


def comparison_for(
    inputs: ReportInputs, settings: Settings, policies: tuple[str, ...] = COUNTERFACTUAL_POLICIES
) -> tuple[object, str]:
    """(the comparison on the same load, or None, and a note saying why there is none)."""
    from flinktune.backends.choice import load_backends
    from flinktune.twin.job_store import TWIN_FILE, job_dir, load_job

    if load_backends().cluster != "twin":
        return None, ("This job runs on a real cluster: nothing can replay its hours under other policies, so the verdict "
                      "judges latency against the target itself and cost against static's reservation.")  # fmt: skip
    if not (job_dir(settings.twin_dir, inputs.job) / TWIN_FILE).exists():
        return None, f"No twin for job {inputs.job!r} under {settings.twin_dir}: the same load cannot be replayed."
    start = tuned_start(inputs)
    if start is None:
        return None, "No decision was recorded, so there is no tuned period to compare."
    twin, trace = load_job(settings.twin_dir, inputs.job)
    end = int(min(twin.now, inputs.features["window_start"].max().timestamp() + 60))
    try:
        same = same_load_from_twin(twin, trace, int(start.timestamp()), end, policy=inputs.policy,
                                   profiling=_profiling_observations(settings, inputs.job))  # fmt: skip
    except ValueError as exc:  # the report still says what happened, and why it has no counterfactual
        return None, f"No counterfactual: {exc}."
    from flinktune.twin.workload import WORKLOADS

    # The workload names the generator Demeter's replayed forecaster trains on (a preceding day of it).
    workload = twin.profile.dataflow.name if twin.profile.dataflow.name in WORKLOADS else "ysb"
    cmp = compare_on_same_load(same, inputs.space, latency_target_ms=inputs.latency_target_ms, recovery_limit_s=settings.recovery_limit_s,
                               prices=inputs.prices, policies=policies, workload=workload)  # fmt: skip
    return cmp, ""


def _log_to_mlflow(settings: Settings, job: str, folder: Path, summary: dict) -> str | None:
    """Log the report folder as artifacts of a run in ``flinktune-report-<job>``; the run id (None when MLflow fails)."""
    try:
        import mlflow

        from models.registry import configure, ensure_experiment

        configure(settings.mlflow_tracking_uri, settings.mlflow_artifact_root)
        with mlflow.start_run(experiment_id=ensure_experiment(f"flinktune-report-{job}"), run_name=folder.name) as run:
            mlflow.log_artifacts(str(folder), artifact_path="report")
            verdict = summary["verdict"]
            mlflow.set_tags({"verdict": "met" if verdict["met"] else "missed", "verdict.headline": verdict["headline"][:5000]})
            same = (summary.get("same_load") or {}).get(summary.get("same_load_policy", ""), {})
            metrics = {f"same_load.{k}": float(v) for k, v in same.items() if isinstance(v, (int, float))}
            mlflow.log_metrics({"hours": float(summary["hours"]), **metrics})
            return run.info.run_id
    except Exception as exc:  # the report on disk is what matters; say why MLflow did not get it
        log.warning("report for %s not logged to MLflow: %s", job, exc)
        return None


def run(
    *,
    job: str,
    since_ms: int | None = None,
    settings: Settings | None = None,
    policy: str | None = None,
    progress: Callable[[str], None] | None = None,
    warn: Callable[[str], None] | None = None,
) -> dict:
    """Write the report; ``progress`` hears each step as it starts, ``warn`` a target below the latency at rest."""
    say = progress or (lambda step: log.info("%s", step))
    job = job_name(job)  # before it reaches any path, model name or API call
    settings = settings or load_settings()
    say(f"reading the curated features of {job} from {settings.lake_dir}")
    features = read_features(settings, job)  # first: a job without features is refused before the store is opened (created)
    warning = target_warning(settings.latency_target_ms, measured_rest_p95_ms(features), "its best minute in the lake")
    if warning:
        (warn or log.warning)(warning)
    store = open_state_store(settings)
    since = pd.Timestamp(since_ms, unit="ms", tz="UTC") if since_ms is not None else None
    decisions = store.decisions(job)
    used = policy or (str(decisions["policy"].mode().iloc[0]) if len(decisions) else "flinktune")
    if used == "guard" and len(decisions):  # the guard only holds; the policy is the one that decided otherwise
        others = decisions[decisions["policy"] != "guard"]
        used = str(others["policy"].mode().iloc[0]) if len(others) else "flinktune"
    inputs = ReportInputs(
        job=job, features=features, decisions=decisions, forecasts=store.forecasts(job),
        latency_target_ms=settings.latency_target_ms, space=default_space(), since=since, prices=load_prices(), policy=used,
        forecast_horizon_s=settings.forecast_horizon_s, data_quality=data_quality_from_lake(Lake(settings.lake_dir), job),
    )  # fmt: skip
    say(f"replaying {', '.join(COUNTERFACTUAL_POLICIES)} on the tuned hours' load (the twin only; about a minute)")
    comparison, note = comparison_for(inputs, settings)
    say("writing the Markdown and HTML report with its plots")
    path = write_report(replace(inputs, comparison=comparison, comparison_note=note), Path(settings.reports_dir))
    summary = json.loads((path.parent / "summary.json").read_text())
    say("logging the report to MLflow")
    run_id = _log_to_mlflow(settings, job, path.parent, summary)
    return {"report": str(path.resolve()), "html": str((path.parent / "report.html").resolve()),
            "verdict": summary["verdict"]["headline"], "mlflow_run_id": run_id}  # fmt: skip


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
