"""flinktune_report: write the job's Markdown and PNG report.

Wiring only: the work lives in ``jobs.report``, imported inside the task.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from airflow.sdk import CronTriggerTimetable, dag, task

from flinktune.orchestration.dag_tasks.dag_wiring import START_DATE, TAGS, default_args, job_param, task_params

DOC = """
### flinktune_report
Daily (or on demand): a Markdown report with plots of the job's decisions, service goals and
resource use, written under the reports folder (`FLINKTUNE_REPORTS_DIR`, default `var/reports`).
"""


@dag(
    dag_id="flinktune_report",
    schedule=CronTriggerTimetable("@daily", timezone="UTC"),
    start_date=START_DATE,
    catchup=False,
    max_active_runs=1,
    tags=[*TAGS, "report"],
    doc_md=DOC,
    default_args=default_args(),
    params={"job": job_param()},
)
def flinktune_report() -> None:
    @task(execution_timeout=timedelta(minutes=10))
    def report(params: dict[str, Any] | None = None) -> dict[str, Any]:
        params = task_params(params)  # first: a bad trigger fails before anything acts
        from flinktune.orchestration.dag_tasks.tasks import report as report_task

        return report_task(params["job"])

    report()


flinktune_report()
