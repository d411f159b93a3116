"""flinktune_ingest: metrics -> raw lake -> validated 10-second and one-minute features, every 5 minutes.

Wiring only: the work lives in ``jobs.simulate``, ``jobs.extract_metrics`` and
:mod:`flinktune.runs.feature_etl` (through :mod:`flinktune.orchestration.dag_tasks.tasks`), imported inside the tasks so that parsing
this file needs none of them.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from airflow.sdk import dag, task

from flinktune.orchestration.dag_tasks.dag_wiring import (
    FEATURES_1M,
    FEATURES_10S,
    INGEST_EVERY,
    backends,
    dag_arguments,
    fleet_targets,
    mark_outlets,
    task_params,
)
from flinktune.orchestration.dag_tasks.ingest_params import ingest_params

EVERY = INGEST_EVERY

DOC = """
### flinktune_ingest
Brings the jobs' metrics into the lake and turns them into the curated `features_10s` and
`features_1m` datasets, for each job of the fleet (`FLINKTUNE_FLEET_FILE`; the `job` param alone
without a fleet, or the job a trigger names).

1. **fleet**: the jobs this run acts on (as in `flinktune_decide`).
2. **collect** (one per job) brings the raw metrics in, by `metrics_source` (empty, the default:
   `twin` on the twin, `prometheus` on a real cluster, after `FLINKTUNE_CLUSTER`):
   - `twin`: runs the digital twin for `hours` and writes its raw metrics to the lake;
   - `prometheus`: extracts the last schedule period (`start_ms`/`end_ms` when set) from
     Prometheus (`FLINKTUNE_PROMETHEUS_URL`, or `conn_id`) into the raw lake;
   - `lake`: the raw metrics are already there; curates `start_ms`..`end_ms` (empty: all).
3. **etl_features** (one per job): Spark job raw -> `curated/features_10s` and
   `curated/features_1m`, each validated against its data contract; a failing batch is
   quarantined, nothing is written and the task fails naming the broken rule. Runs in
   the worker on `FLINKTUNE_SPARK_MASTER` (default `local[2]`; a `spark://` standalone master in the
   rehearsal), through `spark-submit` to a standalone cluster with
   `FLINKTUNE_SPARK_SUBMIT=client|cluster`, or as one SparkApplication per job on Kubernetes
   (`SparkKubernetesOperator`) with `FLINKTUNE_SPARK_SUBMIT=kubernetes` (docs/OPERATIONS.md).

Updates the assets `flinktune://lake/features_10s` and `flinktune://lake/features_1m` (each event
names the job); `flinktune_train` retrains on its own cadence, not on every landing. The cadence
is `FLINKTUNE_SCHEDULE_INGEST_EVERY_S` (default 300 s).
"""


@dag(
    dag_id="flinktune_ingest",
    schedule=EVERY,
    **dag_arguments(
        "ingest",
        "spark",
        doc=DOC,
        params=ingest_params(EVERY),
    ),
)
def flinktune_ingest() -> None:
    @task(execution_timeout=timedelta(minutes=20), map_index_template="{{ task.op_kwargs['target']['job'] }}")
    def collect(target: dict[str, Any], params: dict[str, Any] | None = None) -> dict[str, Any]:
        params = task_params(params)  # first: a bad trigger fails before anything acts
        from flinktune.orchestration.dag_tasks.tasks import collect_metrics

        return collect_metrics(target["job"], params, every_s=EVERY.total_seconds())

    @task(
        execution_timeout=timedelta(minutes=20),
        outlets=[FEATURES_10S, FEATURES_1M],
        map_index_template="{{ task.op_kwargs['window']['job'] }}",
    )
    def etl_features(window: dict[str, Any], params: dict[str, Any] | None = None) -> dict[str, Any]:
        params = task_params(params)  # first: a bad trigger fails before anything acts
        from flinktune.orchestration.dag_tasks.tasks import etl_features as etl

        summary = etl(window["job"], window.get("start_ms"), window.get("end_ms"))
        mark_outlets(window["job"], FEATURES_10S, FEATURES_1M)
        return summary

    windows = collect.expand(target=fleet_targets())
    if backends().spark_submit == "kubernetes":  # the same ETL as a SparkApplication per job
        from flinktune.orchestration.dag_tasks.k8s_operators import etl_spark_task

        etl_spark_task(windows, execution_timeout=timedelta(minutes=20))
    else:
        etl_features.expand(window=windows)


flinktune_ingest()
