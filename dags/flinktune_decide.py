"""flinktune_decide: run the decision loop for a job (keep, reconfigure or profile).

Wiring only: the work lives in ``jobs.decide``, imported inside the task.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from airflow.providers.standard.operators.trigger_dagrun import TriggerDagRunOperator
from airflow.sdk import AssetOrTimeSchedule, CronTriggerTimetable, Param, dag, task

from flinktune.orchestration.dag_wiring import (
    CHAMPIONS, POLICIES, START_DATE, TAGS, default_args, dry_run_param, job_param, task_params,
)

DOC = """
### flinktune_decide
Every 10 minutes, and whenever a new model champion is registered: for each of `ticks` decision
intervals, collect metrics, evaluate, plan with `policy`, guard, realize and store the decision.
With `dry_run` the decisions are stored but never applied to the cluster; left empty, it is true
for a run triggered by hand and false for the schedule. A run triggered by a new champion acts on
the job that champion belongs to. Unknown conf keys fail the run before anything is decided.

When a decision says *profile* on a real cluster (`FLINKTUNE_CLUSTER=kubernetes`),
**request_profile** passes its configurations and planned rate to **trigger_profile**, which
starts `flinktune_profile` (TriggerDagRunOperator: the request carries a conf, which an asset
event cannot show in the UI as plainly). On the twin, `jobs.decide` profiles inline before its
next tick, so both are skipped.
"""


@dag(
    dag_id="flinktune_decide",
    schedule=AssetOrTimeSchedule(timetable=CronTriggerTimetable("*/10 * * * *", timezone="UTC"), assets=CHAMPIONS),
    start_date=START_DATE,
    catchup=False,
    max_active_runs=1,
    tags=[*TAGS, "decide"],
    doc_md=DOC,
    default_args=default_args(retries=1),
    params={
        "job": job_param(),
        "policy": Param("flinktune", enum=list(POLICIES), title="Policy", description="Tuning policy that plans."),
        "dry_run": dry_run_param(),
        "ticks": Param(
            1, type="integer", minimum=1, maximum=500, title="Ticks",
            description="Decision intervals to run (each advances the twin by one interval).",
        ),
    },
)
def flinktune_decide() -> None:
    @task(execution_timeout=timedelta(minutes=30))
    def decide(params: dict[str, Any] | None = None) -> dict[str, Any]:
        params = task_params(params)  # first: a bad trigger fails before anything acts
        from flinktune.settings import load_settings
        from jobs import decide as job

        return job.run(
            job=params["job"], ticks=params["ticks"], policy=params["policy"], dry_run=params["dry_run"],
            settings=load_settings(),
        )

    @task.short_circuit(execution_timeout=timedelta(minutes=5))
    def request_profile(decided: dict[str, Any], params: dict[str, Any] | None = None) -> dict[str, Any] | None:
        params = task_params(params)  # first: a bad trigger fails before anything acts
        from flinktune.orchestration.tasks import profile_request

        return profile_request(params["job"], decided, dry_run=params["dry_run"])

    request = request_profile(decide())
    request >> TriggerDagRunOperator(
        task_id="trigger_profile", trigger_dag_id="flinktune_profile", conf=request,
        execution_timeout=timedelta(minutes=5),
    )


flinktune_decide()
