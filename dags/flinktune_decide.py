"""flinktune_decide: run the decision loop for a job (keep, reconfigure or profile).

Wiring only: the work lives in :mod:`flinktune.runs.decide` (through
:mod:`flinktune.orchestration.dag_tasks.tasks`), imported inside the task.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any, cast

from airflow.providers.standard.operators.trigger_dagrun import TriggerDagRunOperator
from airflow.sdk import AssetOrTimeSchedule, CronTriggerTimetable, Param, dag, task

from flinktune.orchestration.dag_tasks.dag_wiring import (
    CHAMPIONS,
    DECIDE_CRON,
    DECIDE_QUEUE,
    POLICIES,
    dag_arguments,
    dry_run_param,
    fleet_targets,
    task_params,
)

DOC = """
### flinktune_decide
Every 5 minutes (`FLINKTUNE_SCHEDULE_DECIDE_CRON`), and whenever a new model champion is registered: for each of `ticks` decision
intervals, collect metrics, evaluate, plan with `policy`, guard, realize and store the decision.
Every job starts in **advice**: its decisions are stored and shown, never applied, until it is
switched to act (`mode: act` in the fleet file, the annotation `flinktune.io/mode: act`, or
`flinktune fleet act JOB`). With `dry_run` even an acting job's decisions are only stored; left
empty, it is true for a run triggered by hand and false for the schedule. A run triggered by a new champion acts on
the job that champion belongs to; one triggered by `flinktune_watch` acts on its job now, with the
watch's reason as `trigger` (its decision says it came early, and why). Unknown conf keys fail the run before anything is decided.
Its tasks go to the Celery queue `FLINKTUNE_SCHEDULE_DECIDE_QUEUE` when it is set: a worker of
their own, so that a long ETL or training task never holds a decision back.

When a decision says *profile* on a real cluster (`FLINKTUNE_CLUSTER=kubernetes`),
**request_profile** passes its configurations and planned rate to **trigger_profile**, which
starts `flinktune_profile` (TriggerDagRunOperator: the request carries a conf, which an asset
event cannot show in the UI as plainly). On the twin, the decide run profiles inline before its
next tick, so both are skipped.

**The fleet**: **fleet** lists the jobs this run acts on (`flinktune.fleet.targets`): every managed
job of the fleet (`FLINKTUNE_FLEET_FILE`, or labelled FlinkDeployments with
`FLINKTUNE_FLEET_DISCOVER=true`) for the schedule and for a trigger without `job`; the one job
named by a trigger's `job` or by the champion that triggered the run; the `job` param alone when
no fleet is configured. **decide** is mapped over them, one task instance per job, at most as many
at once as the `flinktune_fleet` pool has slots; a job whose decision fails fails its own instance
only. **request_profile** collects the profile requests of the jobs that decided and
**trigger_profile** starts one `flinktune_profile` run per request.
"""

FLEET_POOL = "flinktune_fleet"  # bounds how many jobs decide at once; created with the Airflow home


@dag(
    dag_id="flinktune_decide",
    schedule=AssetOrTimeSchedule(timetable=CronTriggerTimetable(DECIDE_CRON, timezone="UTC"), assets=CHAMPIONS),
    **dag_arguments(
        "decide",
        doc=DOC,
        retries=1,
        queue=DECIDE_QUEUE,
        params={
            "policy": Param("flinktune", enum=list(POLICIES), title="Policy", description="Tuning policy that plans."),
            "dry_run": dry_run_param(),
            "trigger": Param(
                "",
                type="string",
                maxLength=2000,
                title="Trigger",
                description="Why this run decides before its interval (set by flinktune_watch); empty for the schedule.",
            ),
            "ticks": Param(
                1,
                type="integer",
                minimum=1,
                maximum=500,
                title="Ticks",
                description="Decision intervals to run (each advances the twin by one interval).",
            ),
        },
    ),
)
def flinktune_decide() -> None:
    @task(execution_timeout=timedelta(minutes=30), pool=FLEET_POOL, map_index_template="{{ task.op_kwargs['target']['job'] }}")
    def decide(target: dict[str, Any], params: dict[str, Any] | None = None) -> dict[str, Any]:
        params = task_params(params)
        from flinktune.orchestration.dag_tasks.tasks import decide as decide_task

        return decide_task(target, ticks=params["ticks"], trigger=params["trigger"])

    # all_done: the jobs that decided get their profiling even when another job's decision failed.
    @task(execution_timeout=timedelta(minutes=5), trigger_rule="all_done")
    def request_profile(decided: list[dict[str, Any]], params: dict[str, Any] | None = None) -> list[dict[str, Any]]:
        params = task_params(params)
        from flinktune.orchestration.dag_tasks.tasks import profile_requests

        return profile_requests(decided, dry_run=params["dry_run"])

    # TaskFlow passes the mapped decisions as an XComArg and resolves it when the task runs; Airflow
    # types a task's call with the function's own parameters.
    decided = cast("list[dict[str, Any]]", decide.expand(target=fleet_targets()))
    request = request_profile(decided)
    TriggerDagRunOperator.partial(
        task_id="trigger_profile",
        trigger_dag_id="flinktune_profile",
        execution_timeout=timedelta(minutes=5),
    ).expand(conf=request)


flinktune_decide()
