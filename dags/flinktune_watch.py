"""flinktune_watch: between decisions, decide now for a fleet job whose backlog outgrew its size.

Wiring only: the work lives in ``jobs.watch``, imported inside the task.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from airflow.providers.standard.operators.trigger_dagrun import TriggerDagRunOperator
from airflow.sdk import CronTriggerTimetable, Param, dag, task

from flinktune.orchestration.dag_tasks.dag_wiring import (
    DECIDE_QUEUE,
    POLICIES,
    WATCH_CRON,
    dag_arguments,
    dry_run_param,
    fleet_targets,
    task_params,
)

DOC = """
### flinktune_watch
Every minute (`FLINKTUNE_SCHEDULE_WATCH_CRON`; `off` for none): for each fleet job a watched policy tunes,
**watch** reads the last minutes of its raw metrics and what the cluster runs, and asks for a decision
now when, over the last two minutes, the backlog grew by more than 10 s of input or the p95 latency was over
the job's target, with no failure in the last five minutes and no decision in the last three. **trigger_decide** starts one
`flinktune_decide` run per such job, whose decision says it came early and why. It changes nothing itself.
On the twin the decide run watches between its own ticks, so this finds nothing to do.
"""


@dag(
    dag_id="flinktune_watch",
    schedule=CronTriggerTimetable(WATCH_CRON, timezone="UTC") if WATCH_CRON else None,
    **dag_arguments(
        "decide",
        doc=DOC,
        retries=1,
        retry_delay=timedelta(seconds=15),
        queue=DECIDE_QUEUE,
        params={
            "policy": Param("flinktune", enum=list(POLICIES), title="Policy", description="Policy of the decisions it triggers."),
            "dry_run": dry_run_param(),
        },
    ),
)
def flinktune_watch() -> None:
    @task(execution_timeout=timedelta(minutes=2))
    def watch(targets: list[dict[str, Any]], params: dict[str, Any] | None = None) -> list[dict[str, Any]]:
        task_params(params)
        from flinktune.orchestration.dag_tasks.tasks import watch_fleet

        return watch_fleet(targets)

    TriggerDagRunOperator.partial(
        task_id="trigger_decide",
        trigger_dag_id="flinktune_decide",
        execution_timeout=timedelta(minutes=2),
    ).expand(conf=watch(fleet_targets()))


flinktune_watch()
