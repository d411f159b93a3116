"""What the DAG tasks run: the task bodies, the DAG files' shared wiring and the production submitters.

Import from the submodules (this package imports nothing, so loading one never loads Airflow):

- :mod:`~flinktune.orchestration.dag_tasks.tasks`: the task bodies the DAGs call, behind the back-end
  switches (:mod:`flinktune.backends.choice`; the realizer from :mod:`flinktune.backends.cluster`).
- :mod:`~flinktune.orchestration.dag_tasks.dag_wiring`: assets, typed params and default args shared
  by ``dags/`` (imports the Airflow task SDK: DAG files only).
- :mod:`~flinktune.orchestration.dag_tasks.triggers`: what a run may do given how it was started
  (unknown conf keys, ``dry_run`` per run type, the job an asset-triggered run acts on).
- :mod:`~flinktune.orchestration.dag_tasks.trainer_pod`, :mod:`~flinktune.orchestration.dag_tasks.spark_submit`:
  production training (a GPU pod) and ETL (``spark-submit``).
"""

__all__: list[str] = []
