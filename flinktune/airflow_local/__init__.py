"""The local Airflow runner: flinktune's DAGs with ``dag.test()``, no scheduler, no server; the demo,
the rehearsal's Airflow home and the tests use it.

Import from the submodules (Airflow reads its configuration on first import, so the environment
must be prepared before it is loaded):

- :mod:`~flinktune.airflow_local.airflow_home`: ``prepare_airflow_home(var_dir)`` -> env for Airflow.
- :mod:`~flinktune.airflow_local.runner`: ``run_dag`` / ``run_pipeline`` / ``LocalPipeline``.
- :mod:`~flinktune.airflow_local.session`: the child process that runs them, one DAG after another.
- :mod:`~flinktune.airflow_local.in_process`: what that child runs for each DAG (``dag.test()``).
"""

__all__: list[str] = []
