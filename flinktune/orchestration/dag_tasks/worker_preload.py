"""What a Celery worker imports once, before it forks, so that no decide task imports it again.

Airflow's Celery worker forks a process per task from its pool process (the task SDK's supervisor),
so a module the worker imported at its start is already loaded in every task. Without it each decide
task imports Great Expectations (the ``raw_metrics`` contract its fresh rows pass), MLflow (the model
registry), the decision loop and the DAG file's wiring anew: about 5 s of CPU a task, a minute of wall
time on two shared cores. Use it as the worker's Celery ``imports``:
``AIRFLOW__CELERY__EXTRA_CELERY_CONFIG='{"imports": ["flinktune.orchestration.dag_tasks.worker_preload"]}'``
(the rehearsal's decide worker; ``config.celery.extra_celery_config`` in ``docker/helm/values.yaml``).
It only imports: no thread, connection or GX context is made before the fork (a thread held across a
fork can leave a lock held in the child).
"""

from __future__ import annotations

import great_expectations
import great_expectations.expectations
from airflow.providers.standard.operators import trigger_dagrun

import models.registry
import models.store_home
from data_contracts import compiler, validate
from flinktune.backends import local_flink
from flinktune.extract import recent
from flinktune.fleet import targets
from flinktune.localflink import attach
from flinktune.orchestration.dag_tasks import dag_wiring, tasks
from flinktune.report import spread, verdict
from flinktune.runs import decide, decide_cluster

__all__ = ["PRELOADED"]

#: The modules a decide run loads: the DAG file's wiring, the settings' check of the environment (it reads the
#: report's goals), the fleet task, the decision, the model registry, its fresh-data contract check.
PRELOADED = (
    dag_wiring,
    spread,
    verdict,
    trigger_dagrun,
    tasks,
    targets,
    decide,
    decide_cluster,
    local_flink,
    attach,
    recent,
    models.registry,
    models.store_home,
    compiler,
    validate,
    great_expectations.expectations,
)
