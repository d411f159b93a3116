"""flinktune_train: profile the job, then retrain the surrogate and the forecaster.

Wiring only: the work lives in ``jobs.profile``, ``jobs.train_surrogate`` and
``jobs.train_forecaster``, imported inside the tasks so that parsing needs none of them.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from airflow.sdk import AssetOrTimeSchedule, CronTriggerTimetable, dag, task

from flinktune.orchestration.dag_wiring import (
    CHAMPIONS, FEATURES_1M, START_DATE, TAGS, TRAINING, default_args, job_param,
)

DOC = """
### flinktune_train
Retrains the models the decision loop uses, on new features or at least once a day.

1. **profile**: short profiling runs on the twin -> validated `profiling_observations`.
2. **train_surrogate** (after profile): BoTorch GPs, registered in MLflow as
   `flinktune-surrogate-<job>@champion`.
3. **train_forecaster** (in parallel): darts model of the input rate, registered as
   `flinktune-forecaster-<job>@champion`.

Both training tasks update the asset `flinktune://models/champions`, which triggers
`flinktune_decide`. Training tasks have an execution timeout and retry with back-off; they run
in the worker, or in a GPU pod with `FLINKTUNE_TRAINING=kubernetes` (docs/OPERATIONS.md).
"""

@dag(
    dag_id="flinktune_train",
    schedule=AssetOrTimeSchedule(timetable=CronTriggerTimetable("@daily", timezone="UTC"), assets=FEATURES_1M),
    start_date=START_DATE,
    catchup=False,
    max_active_runs=1,
    tags=[*TAGS, "train", "mlflow"],
    doc_md=DOC,
    default_args=default_args(),
    params={"job": job_param()},
)
def flinktune_train() -> None:
    @task(execution_timeout=timedelta(minutes=30))
    def profile(params: dict[str, Any] | None = None) -> dict[str, Any]:
        from flinktune.settings import load_settings
        from jobs import profile as job

        return job.run(job=params["job"], settings=load_settings())

    @task(outlets=[CHAMPIONS], **TRAINING)
    def train_surrogate(params: dict[str, Any] | None = None, run_id: str | None = None) -> dict[str, Any]:
        from flinktune.orchestration.tasks import train

        return train("surrogate", params["job"], run_key=run_id or "")

    @task(outlets=[CHAMPIONS], **TRAINING)
    def train_forecaster(params: dict[str, Any] | None = None, run_id: str | None = None) -> dict[str, Any]:
        from flinktune.orchestration.tasks import train

        return train("forecaster", params["job"], run_key=run_id or "")

    profile() >> train_surrogate()
    train_forecaster()


flinktune_train()
