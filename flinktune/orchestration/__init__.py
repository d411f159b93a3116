"""Orchestration: what the Airflow DAGs run, how they run locally, and the plugin's pages.

Three subpackages, one concept each:

- :mod:`flinktune.orchestration.dag_tasks`: the task bodies the DAG files call and their wiring
  (assets, typed params, triggers), plus the production training pod and ``spark-submit``.
- :mod:`flinktune.orchestration.local`: the local Airflow runner (a self-contained AIRFLOW_HOME,
  each DAG run with ``dag.test()`` in a fresh process); the demo and the tests use it.
- :mod:`flinktune.orchestration.plugin_ui`: the Airflow plugin's job pages (read-only).

Airflow reads its configuration when it is first imported, so nothing here imports Airflow at
module level except :mod:`flinktune.orchestration.dag_tasks.dag_wiring`, which only DAG files use.
``jobs`` never import this package (the back-end switch is :mod:`flinktune.backends`).
"""

__all__: list[str] = []
