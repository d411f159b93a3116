"""What the DAG tasks do, behind the back-end switches: the DAG files call these and nothing else
(``dags/`` imports flinktune only through :mod:`flinktune.orchestration.dag_tasks`).

Each function is one task's body: it resolves :func:`flinktune.backends.choice.load_backends`
and settings at run time, imports the job it needs lazily (DAG files must parse fast), and returns
a JSON-ready dict or list (the task's XCom). Errors name the param, variable or file at fault.

- :func:`collect_metrics`: the ingest's raw metrics of one job, from the twin, Prometheus or the lake.
- :func:`extract_prometheus_window`: the last schedule period of a job's metrics from Prometheus.
- :func:`etl_features`: in-process Spark, or ``spark-submit`` to a standalone cluster (:mod:`.spark_submit`).
- :func:`train`: ``flinktune.runs``' training of the model in process; :func:`profile_on_twin`: the train DAG's twin profiling.
- :func:`decide`: one fleet job's decide run (:mod:`flinktune.runs.decide`) with its own goals; :func:`report`: ``jobs.report``.
- :func:`suggest_profile_configs` / :func:`profile_config`: the profiling DAG's mapped runs.
- :func:`profile_request`: the profiling run a decision asked for, if it must go through that DAG.
- :func:`watch_fleet`: the fleet jobs whose backlog outgrew their size, as ``flinktune_decide`` confs.
- :func:`replay`: the what-if replay (:func:`flinktune.replay.runner.cli_replay`).

On Kubernetes the training and the ETL are provider operators instead (:mod:`.k8s_operators`).
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from flinktune.backends.choice import load_backends

__all__ = [
    "collect_metrics",
    "decide",
    "etl_features",
    "extract_prometheus_window",
    "profile_config",
    "profile_on_twin",
    "profile_request",
    "profile_requests",
    "replay",
    "report",
    "suggest_profile_configs",
    "train",
    "watch_fleet",
]

log = logging.getLogger(__name__)


def _settings() -> Any:
    from flinktune.settings import load_settings

    return load_settings()


def etl_features(job: str, start_ms: int | None = None, end_ms: int | None = None) -> dict[str, Any]:
    """Raw -> curated ``features_10s`` and ``features_1m`` for ``job``; the job's summary (``{}`` from a cluster driver).

    With ``FLINKTUNE_SPARK_SUBMIT=kubernetes`` the DAG submits a SparkApplication instead
    (:func:`flinktune.orchestration.dag_tasks.k8s_operators.etl_spark_task`), not this.
    """
    settings, backends = _settings(), load_backends()
    if not backends.spark_submit:
        from flinktune.runs.feature_etl import etl_features as run_etl

        return run_etl(job=job, start_ms=start_ms, end_ms=end_ms, settings=settings)
    from flinktune.orchestration.dag_tasks.spark_submit import run_spark_submit, spark_submit_command

    cmd = spark_submit_command(
        job, master=settings.spark_master, deploy_mode=backends.spark_submit, start_ms=start_ms, end_ms=end_ms
    )
    return run_spark_submit(cmd)


def collect_metrics(job: str, params: Mapping[str, Any], *, every_s: float) -> dict[str, Any]:
    """The ``collect`` task of ``flinktune_ingest`` for ``job``: its raw metrics into the lake, by the
    run's ``metrics_source`` (empty: ``twin`` on the twin, ``prometheus`` on a real cluster); the
    window the ETL then curates, ``{job, start_ms, end_ms, ...}``."""
    source = params["metrics_source"] or ("twin" if load_backends().cluster == "twin" else "prometheus")
    if source == "twin":
        from jobs import simulate

        summary = simulate.run(
            job=job,
            workload=params["workload"],
            hours=params["hours"],
            seed=params["seed"],
            trace_file=params["trace_file"] or None,
            settings=_settings(),
        )
        return {**summary, "job": job}
    if source == "prometheus":
        return extract_prometheus_window(
            job, params["start_ms"], params["end_ms"], every_s=every_s, conn_id=params["conn_id"] or None
        )
    # lake: already there; the ETL takes the start_ms/end_ms params (all raw data when they are empty).
    return {"job": job, "start_ms": params["start_ms"], "end_ms": params["end_ms"]}


#: How far back a scheduled extraction catches up after missed runs (older gaps stay gaps).
MAX_CATCH_UP_S = 3600


def extract_prometheus_window(
    job: str, start_ms: int | None, end_ms: int | None, *, every_s: float, conn_id: str | None = None, now_ms: int | None = None
) -> dict[str, Any]:
    """Extract ``job``'s metrics from Prometheus into the raw lake (``flinktune.runs.extraction``); the
    extraction's summary with the window, which the ETL then curates.

    Without ``start_ms``/``end_ms`` (the schedule's runs) the window ends at the last whole period
    of ``every_s`` seconds before now (aligned, so a rerun replaces the same files) and starts where
    the previous extraction of this job ended (a watermark next to the state store), so runs that
    were late or skipped leave no gap; without a watermark, or one older than
    :data:`MAX_CATCH_UP_S`, it is one period.
    """
    import json
    import time

    from flinktune.lake.atomic import atomic_write
    from flinktune.runs.extraction import extract_range

    settings = _settings()
    period_ms = int(every_s * 1000)
    now = int(time.time() * 1000) if now_ms is None else now_ms
    end = end_ms if end_ms is not None else (now // period_ms) * period_ms
    mark = Path(settings.state_db).parent / "extract" / f"{job}.json"
    start = start_ms
    if start is None:
        last = json.loads(mark.read_text()).get("end_ms") if mark.is_file() else None
        start = int(last) if isinstance(last, int) and end - MAX_CATCH_UP_S * 1000 <= last < end else end - period_ms
    summary = extract_range(job=job, source="prometheus", start_ms=start, end_ms=end, settings=settings, conn_id=conn_id)
    if start_ms is None and end_ms is None:
        mark.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(mark, json.dumps({"end_ms": end}).encode())
    return {**summary, "job": job, "start_ms": start, "end_ms": end}


def train(model: str, job: str) -> dict[str, Any]:
    """Train and register ``model`` (``surrogate`` | ``forecaster``) for ``job`` in this worker; the job's summary.
    Skips (``AirflowSkipException``, with the reason) when the job has no training data in the lake yet.

    With ``FLINKTUNE_TRAINING=kubernetes`` the DAG runs a trainer pod instead
    (:func:`flinktune.orchestration.dag_tasks.k8s_operators.trainer_pod_task`), not this.
    """
    from flinktune.orchestration.dag_tasks.trainer_pod import TRAINING_MODULES

    if model not in TRAINING_MODULES:
        raise ValueError(f"unknown model {model!r}; known: {', '.join(TRAINING_MODULES)}")
    from flinktune.lake import Lake

    if model == "surrogate":
        from flinktune.runs.surrogate_training import DATASET as dataset
        from flinktune.runs.surrogate_training import train_surrogate as run_training
    else:
        from flinktune.runs.forecaster_candidates import DATASET as dataset
        from flinktune.runs.forecaster_training import train_forecaster as run_training  # type: ignore[assignment]
    settings = _settings()
    lake = Lake(settings.lake_dir)  # type: ignore[arg-type]
    if not lake.dataset_files(dataset, job):
        # A fleet job with nothing to learn from yet (new, or profiled only through flinktune_profile on a
        # real cluster) is not a failed retrain: the scheduled run skips it and says why.
        from airflow.sdk.exceptions import AirflowSkipException

        raise AirflowSkipException(
            f"{model} of job {job!r}: no {dataset} in the lake yet ({lake.curated_job_dir(dataset, job)}); nothing to train on"
        )
    return run_training(job=job, settings=settings)


def profile_on_twin(job: str) -> dict[str, Any]:
    """The train DAG's profiling of ``job`` on the twin (:mod:`flinktune.runs.twin_profiling`: the policy's start-up design); the
    job's summary. Skips (``AirflowSkipException``, with the reason) on a real cluster, where profiling
    runs go through ``flinktune_profile`` and twin rows must not land in a real job's observations."""
    if load_backends().cluster != "twin":
        from airflow.sdk.exceptions import AirflowSkipException

        raise AirflowSkipException(
            "real cluster: profiling runs through the flinktune_profile DAG; the surrogate retrains on the observations it wrote"
        )
    from flinktune.runs.twin_profiling import profile_on_twin as run_profiling

    return run_profiling(job=job, settings=_settings())


def decide(target: Mapping[str, Any], *, ticks: int, trigger: str | None = None) -> dict[str, Any]:
    """One fleet job's decide run (:func:`flinktune.runs.decide.decide`): ``target`` is a fleet target (``job``, ``policy``,
    ``dry_run``, ``mode`` and its source, ``goals``: the job's own goals over the settings); ``trigger``
    the watch alarm's reason of an early decision. It acts only when the run is not dry and the job's
    mode is act (:mod:`flinktune.decision.modes`). The run's summary with ``dry_run``."""
    from flinktune.runs.decide import decide as run_decide

    decided = run_decide(
        job=target["job"],
        ticks=ticks,
        policy=target["policy"],
        apply=not target["dry_run"],
        settings=_settings().model_copy(update=target["goals"]),
        trigger=trigger or None,
        fleet_mode=target.get("mode"),
        fleet_source=target.get("mode_source"),
    )
    return {**decided, "dry_run": target["dry_run"]}


def report(job: str) -> dict[str, Any]:
    """The run report of ``job`` (``jobs.report``); its summary."""
    from jobs import report as job_module

    return job_module.run(job=job, settings=_settings())


def suggest_profile_configs(job: str, configs: Sequence[Mapping[str, Any]], *, max_runs: int, seed: int) -> list[dict[str, Any]]:
    """The configurations to profile: ``configs`` checked against the space, or a space-filling
    design of ``max_runs`` when empty. More configurations than ``max_runs`` is a budget error."""
    from flinktune.config_space import ConfigError, Configuration, default_space
    from flinktune.twin.profiling import initial_design

    space = default_space()
    if not configs:
        return [c.to_dict() for c in initial_design(space, max_runs, seed)]
    if len(configs) > max_runs:
        raise ValueError(f"param configs: {len(configs)} configurations exceed the budget max_runs={max_runs} for job {job!r}")
    out = []
    for i, raw in enumerate(configs):
        config = Configuration.from_dict(raw, where=f"param configs[{i}]")
        if not space.contains(config):
            raise ConfigError(f"param configs[{i}]: {config.to_dict()} is not in the configuration space {space}")
        out.append(config.to_dict())
    return out


def profile_config(job: str, config: Mapping[str, Any], *, rates: Sequence[float], duration_s: int, seed: int) -> dict[str, Any]:
    """One short-lived profiling deployment of ``config`` (on the twin: one twin profiling run).

    On Kubernetes: a copy of the FlinkDeployment ``job`` in ``FLINKTUNE_K8S_NAMESPACE`` runs
    ``config`` on the live input (:func:`flinktune.kubernetes.profiling.run_profiling_deployment`),
    warms up 120 s, is measured for ``duration_s`` from the lake's raw metrics and is deleted;
    ``rates`` holds at most the expected rate (used when the lake has no ``workloadRate``); ``seed``
    is unused (nothing random). Budget: ``FLINKTUNE_PROFILE_BUDGET_CPU`` (cores, default 50) and
    ``FLINKTUNE_PROFILE_BUDGET_MEMORY_MB`` (default 430000), JobManager included.
    """
    if load_backends().cluster != "twin":
        return _profile_on_kubernetes(job, config, rates=rates, duration_s=duration_s)
    from flinktune.runs.twin_profiling import profile_on_twin as run_profiling

    summary = run_profiling(
        job=job, configs=[dict(config)], rates=list(rates) or None, duration_s=duration_s, seed=seed, settings=_settings()
    )
    return {**summary, "config": dict(config)}


def _profile_on_kubernetes(job: str, config: Mapping[str, Any], *, rates: Sequence[float], duration_s: int) -> dict[str, Any]:
    from flinktune.backends.cluster import kubernetes_api, kubernetes_settings
    from flinktune.config_space import Configuration
    from flinktune.etl.observations import write_observations
    from flinktune.kubernetes.profiling import ResourceBudget, run_profiling_deployment
    from flinktune.lake import Lake, LakeMetricsSource
    from flinktune.settings import ProfilingSettings, read_group

    k8s = kubernetes_settings()
    if len(rates) > 1:
        raise ValueError(
            f"param rates: a profiling deployment reads the live input topic, so at most one rate, got {list(rates)}"
        )
    limits = read_group(ProfilingSettings)
    budget = ResourceBudget(limits.cpu, limits.memory_mb)
    settings = _settings()
    df = run_profiling_deployment(
        kubernetes_api(),
        k8s.namespace,
        job,
        Configuration.from_dict(config, where="param config"),
        rate=float(rates[0]) if rates else None,
        metrics_source=LakeMetricsSource(Lake(settings.lake_dir)),
        measure_s=float(duration_s),
        budget=budget,
        vertex_ids=k8s.vertex_ids,
    )
    path = write_observations(df, settings)
    return {"rows": len(df), "path": str(path), "config": dict(config)}


def profile_request(job: str, decided: Mapping[str, Any], *, dry_run: bool) -> dict[str, Any] | None:
    """The ``flinktune_profile`` conf for the newest profile decision of this decide run, or ``None``.

    ``None`` also when the run was a dry run (nothing is applied) or the cluster is the twin, where
    ``jobs.decide`` already profiled inline before its next tick.
    """
    ticks = {float(d["ts"]) for d in decided.get("decisions", []) if d.get("action") == "profile"}
    if dry_run or not ticks or load_backends().cluster == "twin":
        return None
    from flinktune.decision.store import open_state_store

    rows = open_state_store(_settings()).decisions(job, limit=max(len(decided["decisions"]), 1))
    rows = rows[(rows["action"] == "profile") & rows["ts"].isin(ticks)]
    if rows.empty:
        raise LookupError(f"decide reported profile decisions at {sorted(ticks)} for job {job!r} but the state store has none")
    newest = rows.iloc[-1]
    inputs = json.loads(newest["inputs"]) if isinstance(newest["inputs"], str) else {}
    rate = inputs.get("profile_rate", inputs.get("planned_rate"))
    return {"job": job, "configs": json.loads(newest["profile_configs"]), "rates": [float(rate)] if rate is not None else []}


def profile_requests(decided: Iterable[Mapping[str, Any]], *, dry_run: bool) -> list[dict[str, Any]]:
    """:func:`profile_request` for each job of a fleet's decide run that decided (``decided``: their returns).

    A job whose decision failed has no return and is not in ``decided``; a job decided as a dry run
    (its return's ``dry_run``) gets no request, as the whole run gets none when ``dry_run``.
    """
    out = []
    for d in decided:
        request = profile_request(str(d["job"]), d, dry_run=dry_run or bool(d.get("dry_run")))
        if request is not None:
            out.append(request)
    return out


def watch_fleet(targets: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The ``flinktune_decide`` confs for the fleet jobs (``targets``: the fleet task's) whose watch fired.

    Only watched policies (:data:`flinktune.decision.watch.WATCHED_POLICIES`) are checked. Each conf
    names its job, keeps its policy and dry run, and carries the alarm's reason as ``trigger``; a job
    whose check fails is logged and left to its scheduled decision."""
    from flinktune.decision.watch import WATCHED_POLICIES
    from jobs import watch

    confs = []
    for t in targets:
        if t["policy"] not in WATCHED_POLICIES:
            continue
        try:
            seen = watch.run(job=str(t["job"]), settings=_settings().model_copy(update=dict(t.get("goals") or {})))
        except Exception as exc:  # one job's watch never holds back another's
            log.warning("watch for %s failed: %s", t["job"], exc)
            continue
        if seen["alarm"]:
            log.info("watch: %s decides now: %s", t["job"], seen["alarm"])
            confs.append({"job": t["job"], "policy": t["policy"], "dry_run": bool(t["dry_run"]), "trigger": seen["alarm"]})
    return confs


def replay(*, trace: str, policies: str, hours: float, failures: str, seed: int, run_id: str) -> dict[str, Any]:
    """Replay ``trace`` under ``policies`` into ``<reports_dir>/replay/<run_id>/``; ``{out_dir, paths, policies, wall_s}``."""
    from flinktune.replay.runner import cli_replay

    out_dir = Path(_settings().reports_dir) / "replay" / re.sub(r"[^A-Za-z0-9_.-]+", "_", run_id)
    summary = cli_replay(
        trace=trace, policies=policies, hours=hours, failures=failures, seed=seed, out_dir=out_dir, workers=1, plots=True
    )
    return {"out_dir": str(out_dir), **summary, "wall_s": round(float(summary["wall_s"]), 2)}
