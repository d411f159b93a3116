"""flinktune_train: profile the job, then retrain the surrogate and the forecaster.

Wiring only: the work lives in :mod:`flinktune.runs` (``twin_profiling``, ``surrogate_training``,
``forecaster_training``, through :mod:`flinktune.orchestration.dag_tasks.tasks`), imported inside the
tasks so that parsing needs none of them.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from airflow.sdk import CronTriggerTimetable, TriggerRule, dag, task

from flinktune.orchestration.dag_tasks.dag_wiring import (
    CHAMPIONS,
    RETRAIN_CRON,
    TRAINING,
    backends,
    dag_arguments,
    fleet_targets,
    mark_outlets,
    task_params,
)

_BY_JOB = "{{ task.op_kwargs['target']['job'] }}"  # a mapped instance is named by its job in the UI

DOC = """
### flinktune_train
Retrains the models the decision loop uses every 6 hours (its own cadence: features land every 5
minutes, and retraining on each landing would retrain every 5 minutes), or when triggered by hand.

For each job of the fleet (**fleet**, as in `flinktune_decide`: every managed job on the schedule,
the job a trigger or a champion names, the `job` param alone without a fleet), mapped one task
instance per job:

1. **profile**: short profiling runs on the twin -> validated `profiling_observations`; skipped on a
   real cluster (`FLINKTUNE_CLUSTER=kubernetes`), where `flinktune_profile` profiles.
2. **train_surrogate** (after profile): BoTorch GPs, registered in MLflow as
   `flinktune-surrogate-<job>@champion`.
3. **train_forecaster** (in parallel): darts model of the input rate, registered as
   `flinktune-forecaster-<job>@champion`.

Both training tasks update the asset `flinktune://models/champions` (the event names the job),
which triggers `flinktune_decide` for that job. Training tasks have an execution timeout and retry
with back-off; they run in the worker, or in a GPU pod (`KubernetesPodOperator`) with
`FLINKTUNE_TRAINING=kubernetes` (docs/OPERATIONS.md).
"""


@dag(
    dag_id="flinktune_train",
    schedule=CronTriggerTimetable(RETRAIN_CRON, timezone="UTC"),
    **dag_arguments("train", "mlflow", doc=DOC),
)
def flinktune_train() -> None:
    @task(execution_timeout=timedelta(minutes=30), map_index_template=_BY_JOB)
    def profile(target: dict[str, Any], params: dict[str, Any] | None = None) -> dict[str, Any]:
        params = task_params(params)  # first: a bad trigger fails before anything acts
        from flinktune.orchestration.dag_tasks.tasks import profile_on_twin

        return profile_on_twin(target["job"])

    # none_failed: on a real cluster profile is skipped and the surrogate trains on the observations there.
    @task(outlets=[CHAMPIONS], trigger_rule=TriggerRule.NONE_FAILED, map_index_template=_BY_JOB, **TRAINING)
    def train_surrogate(target: dict[str, Any], params: dict[str, Any] | None = None) -> dict[str, Any]:
        params = task_params(params)  # first: a bad trigger fails before anything acts
        from flinktune.orchestration.dag_tasks.tasks import train

        summary = train("surrogate", target["job"])
        mark_outlets(target["job"], CHAMPIONS)
        return summary

    @task(outlets=[CHAMPIONS], map_index_template=_BY_JOB, **TRAINING)
    def train_forecaster(target: dict[str, Any], params: dict[str, Any] | None = None) -> dict[str, Any]:
        params = task_params(params)  # first: a bad trigger fails before anything acts
        from flinktune.orchestration.dag_tasks.tasks import train

        summary = train("forecaster", target["job"])
        mark_outlets(target["job"], CHAMPIONS)
        return summary

    targets = fleet_targets()
    if backends().training == "kubernetes":  # the same tasks as trainer pods on GPU nodes, one per job
        from flinktune.orchestration.dag_tasks.k8s_operators import trainer_pod_task

        surrogate = trainer_pod_task("surrogate", targets, trigger_rule=TriggerRule.NONE_FAILED, **TRAINING)
        trainer_pod_task("forecaster", targets, **TRAINING)
    else:
        surrogate = train_surrogate.expand(target=targets)
        train_forecaster.expand(target=targets)
    profile.expand(target=targets) >> surrogate


flinktune_train()
