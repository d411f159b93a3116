"""Orchestration: what the Airflow DAGs run and the plugin's pages.

Two subpackages, one concept each (the local Airflow runner is :mod:`flinktune.airflow_local`):

- :mod:`flinktune.orchestration.dag_tasks`: the task bodies the DAG files call and their wiring
  (assets, typed params, triggers), plus the production training pod and ``spark-submit``.
- :mod:`flinktune.orchestration.plugin_ui`: the Airflow plugin's job pages (read-only).

Airflow reads its configuration when it is first imported, so nothing here imports Airflow at
module level except :mod:`flinktune.orchestration.dag_tasks.dag_wiring`, which only DAG files use.
``jobs`` never import this package (the back-end switch is :mod:`flinktune.backends`).
"""

__all__: list[str] = []
