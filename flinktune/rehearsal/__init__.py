"""The production rehearsal: the shipped topology on this machine, driving a real Flink through Airflow.

- ``servers``: processes in their own process groups, stopped by group; throwaway PostgreSQL databases;
- ``stack``: the parts (Flink clusters and jobs, Prometheus, MLflow, Spark standalone, Airflow 3 with
  Celery workers) started in order;
- ``scenario``: the rate plans, the unattended run and its summary (``flinktune rehearse``);
- ``drain``: the end, where the decide and ingest runs in flight finish and no new one starts;
- ``verdicts``: each job's changes judged correct / needless / late (the loop benchmark's judge).
"""

from flinktune.rehearsal.scenario import DEFAULT_JOBS, RehearsalOptions, rehearse
from flinktune.rehearsal.stack import JobPlan

__all__ = ["DEFAULT_JOBS", "JobPlan", "RehearsalOptions", "rehearse"]
