"""The work of each pipeline step, one function per run: deciding, profiling on the twin, training
the surrogate and the forecaster, the feature ETL. Use these from ``python -m jobs.<name>`` (which
only parses, calls and prints), the DAG tasks (:mod:`flinktune.orchestration.dag_tasks`) and the
``flinktune`` command. Import submodules directly: nothing heavy loads with the package.
"""

__all__: list[str] = []
