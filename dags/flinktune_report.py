"""flinktune_report: write the job's Markdown and PNG report.

Wiring only: the work lives in ``jobs.report``, imported inside the task.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from airflow.sdk import CronTriggerTimetable, dag, task

from flinktune.orchestration.dag_tasks.dag_wiring import dag_arguments, task_params

DOC = """
### flinktune_report
Daily (or on demand): a Markdown report with plots of the job's decisions, service goals and
resource use, written under the reports folder (`FLINKTUNE_REPORTS_DIR`, default `var/reports`).
"""


@dag(
    dag_id="flinktune_report",
    schedule=CronTriggerTimetable("@daily", timezone="UTC"),
    **dag_arguments("report", doc=DOC),
)
def flinktune_report() -> None:
    @task(execution_timeout=timedelta(minutes=10))
    def report(params: dict[str, Any] | None = None) -> dict[str, Any]:
        params = task_params(params)  # first: a bad trigger fails before anything acts
        from flinktune.orchestration.dag_tasks.tasks import report as report_task

        return report_task(params["job"])

    report()


flinktune_report()
