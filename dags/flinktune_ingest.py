"""flinktune_ingest: metrics -> raw lake -> validated 10-second and one-minute features, every 5 minutes.

Wiring only: the work lives in ``jobs.simulate`` and ``jobs.etl_features``, imported inside the
tasks so that parsing this file needs neither of them.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from airflow.sdk import Param, TriggerRule, dag, task

from flinktune.orchestration.dag_tasks.dag_wiring import (
    FEATURES_1M, FEATURES_10S, START_DATE, TAGS, backends, default_args, job_param, mark_outlets, task_params,
)

EVERY = timedelta(minutes=5)

DOC = """
### flinktune_ingest
Brings the job's metrics into the lake and turns them into the curated `features_10s` and
`features_1m` datasets.

1. **simulate**: when the metrics source is the twin, runs the digital twin for `hours` and
   writes its raw metrics to the lake. Skipped otherwise (Prometheus metrics are extracted
   outside this DAG).
2. **etl_features**: Spark job raw -> `curated/features_10s` and `curated/features_1m`, each
   validated against its data contract; a failing batch is quarantined, nothing is written and
   the task fails naming the broken rule. Runs in
   the worker on `FLINKTUNE_SPARK_MASTER` (default `local[2]`), through `spark-submit` to a standalone
   cluster with `FLINKTUNE_SPARK_SUBMIT=client|cluster`, or as a SparkApplication on Kubernetes
   (`SparkKubernetesOperator`) with `FLINKTUNE_SPARK_SUBMIT=kubernetes` (docs/OPERATIONS.md).

Updates the assets `flinktune://lake/features_10s` and `flinktune://lake/features_1m` (each event
names the job); `flinktune_train` retrains on its own cadence, not on every landing.
"""


@dag(
    dag_id="flinktune_ingest",
    schedule=EVERY,
    start_date=START_DATE,
    catchup=False,
    max_active_runs=1,
    tags=[*TAGS, "ingest", "spark"],
    doc_md=DOC,
    default_args=default_args(),
    params={
        "job": job_param(),
        "metrics_source": Param(
            "twin", enum=["twin", "lake", "prometheus"], title="Metrics source",
            description="twin: simulate the job here; lake: raw metrics are already in the lake (the decision "
            "task on the twin writes them as it runs); prometheus: metrics come from the real cluster.",
        ),
        "workload": Param(
            "ysb", type="string", pattern=r"^[a-z0-9][a-z0-9_-]{0,62}$", title="Twin workload",
            description="Input-rate workload the twin replays (twin only).",
        ),
        "hours": Param(
            EVERY.total_seconds() / 3600, type="number", exclusiveMinimum=0, maximum=48,
            title="Hours to simulate", description="Simulated time per run (twin only); default: one schedule period.",
        ),
        "seed": Param(7, type="integer", minimum=0, title="Seed", description="Twin random seed (twin only)."),
        "trace_file": Param(
            "", type="string", title="Trace file",
            description="CSV input-rate trace to replay instead of the workload (twin only); empty: generate one.",
        ),
        "start_ms": Param(None, type=["null", "integer"], minimum=0, title="From (epoch ms)",
                          description="Curate raw data from this time when not simulating; empty: all of it."),
        "end_ms": Param(None, type=["null", "integer"], minimum=0, title="To (epoch ms)",
                        description="Curate raw data up to this time when not simulating; empty: all of it."),
    },
)
def flinktune_ingest() -> None:
    @task(execution_timeout=timedelta(minutes=20))
    def simulate(params: dict[str, Any] | None = None) -> dict[str, Any]:
        params = task_params(params)  # first: a bad trigger fails before anything acts
        if params["metrics_source"] != "twin":
            from airflow.sdk.exceptions import AirflowSkipException

            raise AirflowSkipException(f"metrics come from {params['metrics_source']}, not the twin")
        from flinktune.settings import load_settings
        from jobs import simulate as job

        return job.run(
            job=params["job"], workload=params["workload"], hours=params["hours"], seed=params["seed"],
            trace_file=params["trace_file"] or None, settings=load_settings(),
        )

    # none_failed: still runs when simulate was skipped (metrics already in the lake); then the
    # window is None (Airflow logs "XCom not found" for the skipped task) and the ETL takes the
    # start_ms/end_ms params (all raw data when they are empty).
    @task(execution_timeout=timedelta(minutes=20), trigger_rule=TriggerRule.NONE_FAILED, outlets=[FEATURES_10S, FEATURES_1M])
    def etl_features(window: dict[str, Any] | None, params: dict[str, Any] | None = None) -> dict[str, Any]:
        params = task_params(params)  # first: a bad trigger fails before anything acts
        from flinktune.orchestration.dag_tasks.tasks import etl_features as etl

        window = window or {"start_ms": params["start_ms"], "end_ms": params["end_ms"]}
        summary = etl(params["job"], window.get("start_ms"), window.get("end_ms"))
        mark_outlets(params["job"], FEATURES_10S, FEATURES_1M)
        return summary

    if backends().spark_submit == "kubernetes":  # the same ETL as a SparkApplication
        from flinktune.orchestration.dag_tasks.k8s_operators import etl_spark_task

        simulate() >> etl_spark_task(execution_timeout=timedelta(minutes=20), trigger_rule=TriggerRule.NONE_FAILED)
    else:
        etl_features(simulate())


flinktune_ingest()
