"""Running flinktune's Airflow DAGs: a local AIRFLOW_HOME and an in-process ``dag.test()`` runner.

Airflow reads its configuration when it is first imported, so nothing in this package imports
Airflow at module level except :mod:`flinktune.orchestration.dag_wiring`, which only DAG files use.
Import what you need from the submodules:

- :mod:`flinktune.orchestration.airflow_home`: ``prepare_airflow_home(var_dir)`` -> env for Airflow.
- :mod:`flinktune.orchestration.runner`: ``run_dag`` / ``run_pipeline`` (each DAG in a fresh process).
- :mod:`flinktune.orchestration.in_process`: what that fresh process runs (``dag.test()``).
- :mod:`flinktune.orchestration.dag_wiring`: assets, typed params and default args shared by ``dags/``.
- :mod:`flinktune.orchestration.triggers`: what a run may do given how it was started (unknown conf keys,
  ``dry_run`` per run type, the job an asset-triggered run acts on); ``dag_wiring.task_params`` calls it.
- :mod:`flinktune.orchestration.tasks`: the task bodies the DAGs call, behind the back-end switches
  (:mod:`flinktune.backends.choice`; the realizer from :mod:`flinktune.backends.cluster`).
- :mod:`flinktune.orchestration.trainer_pod`, :mod:`flinktune.orchestration.spark_submit`: production training and ETL.
- :mod:`flinktune.orchestration.overview`, :mod:`flinktune.orchestration.overview_html`: the plugin's job pages.
"""

__all__: list[str] = []
