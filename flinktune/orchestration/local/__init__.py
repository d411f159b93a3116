"""The local Airflow runner: flinktune's DAGs with ``dag.test()``, no scheduler, no server.

Import from the submodules (Airflow reads its configuration on first import, so the environment
must be prepared before it is loaded):

- :mod:`~flinktune.orchestration.local.airflow_home`: ``prepare_airflow_home(var_dir)`` -> env for Airflow.
- :mod:`~flinktune.orchestration.local.runner`: ``run_dag`` / ``run_pipeline`` (each DAG in a fresh process).
- :mod:`~flinktune.orchestration.local.in_process`: what that fresh process runs (``dag.test()``).
"""

__all__: list[str] = []
