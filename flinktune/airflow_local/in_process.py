"""The in-process side of the runner: load one DAG from the dags folder and run ``dag.test()``.

Use :func:`run_in_process` only in a process whose environment was prepared by
:func:`flinktune.airflow_local.airflow_home.prepare_airflow_home` *before* Airflow was imported
(the child of :class:`flinktune.airflow_local.session.DagSession` is such a process; everyone else
calls :func:`flinktune.airflow_local.runner.run_dag` or ``run_pipeline``). It may be called again
in the same process for the next run. Airflow is imported inside the functions so that
importing this module never fixes Airflow's configuration by accident.

The summary it returns is a JSON-ready dict::

    {"dag_id": str, "run_id": str | None,
     "state": "success" | "failed" | "rejected" | "not_found",
     "tasks": {task_id: state}, "returns": {task_id: XCom return value},
     "errors": {task_id: "ExceptionType: message"}, "message": str | None, "seconds": float}

``rejected`` means the params failed validation (or named an unknown param) and no task ran.
"""

from __future__ import annotations

import time
from typing import Any

__all__ = ["run_in_process"]


def _failure_recorder() -> Any:
    """An Airflow task listener that keeps each failed task's exception (the last try wins)."""
    from airflow.listeners import hookimpl

    class FailureRecorder:
        def __init__(self) -> None:
            self.errors: dict[str, str] = {}

        @hookimpl
        def on_task_instance_failed(self, previous_state: Any, task_instance: Any, error: Any) -> None:
            if isinstance(error, BaseException):
                text = f"{type(error).__name__}: {error}"
            else:
                text = str(error) if error else "failed without an exception (see the log)"
            self.errors[task_instance.task_id] = text

    return FailureRecorder()


def _summary(dag_id: str, state: str, started: float, **fields: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "dag_id": dag_id,
        "run_id": None,
        "state": state,
        "tasks": {},
        "returns": {},
        "errors": {},
        "message": None,
    }
    return {**base, **fields, "seconds": round(time.monotonic() - started, 3)}


def _last_line(traceback_text: str) -> str:
    lines = [line for line in traceback_text.strip().splitlines() if line.strip()]
    return lines[-1].strip() if lines else traceback_text


def run_in_process(dag_id: str, conf: dict[str, Any], *, retries: int | None = None) -> dict[str, Any]:
    """Run ``dag_id`` from the configured dags folder once with ``conf`` and summarise the run.

    ``retries`` overrides every task's retries for this run (the demo passes 0 so that a broken
    step fails at once instead of waiting out ``retry_delay``); ``None`` keeps the DAG's own.
    Run failures are reported in the summary, not raised; Airflow errors outside a task raise.
    """
    started = time.monotonic()
    from airflow.configuration import conf as airflow_conf
    from airflow.dag_processing.dagbag import DagBag
    from airflow.exceptions import ParamValidationError
    from airflow.sdk.listener import get_listener_manager

    dags_folder = airflow_conf.get("core", "dags_folder")
    bag = DagBag(dag_folder=dags_folder)
    dag = bag.dags.get(dag_id)
    if dag is None:
        if bag.import_errors:
            detail = "; import errors: " + "; ".join(
                f"{path}: {_last_line(tb)}" for path, tb in sorted(bag.import_errors.items())
            )
        else:
            detail = f"; DAGs there: {', '.join(sorted(bag.dag_ids)) or 'none'}"
        return _summary(dag_id, "not_found", started, message=f"DAG {dag_id!r} not found in {dags_folder}{detail}")

    unknown = sorted(set(conf) - set(dag.params.keys()))
    if unknown:
        message = (
            f"unknown param(s) {', '.join(map(repr, unknown))} for DAG {dag_id!r}; "
            f"it takes: {', '.join(sorted(dag.params.keys())) or 'no params'}"
        )
        return _summary(dag_id, "rejected", started, message=message)

    if retries is not None:
        for task in dag.tasks:
            task.retries = retries

    recorder = _failure_recorder()
    listeners = get_listener_manager()
    listeners.add_listener(recorder)  # tasks run in this process, so it sees them
    try:
        dag_run = dag.test(run_conf=conf)
    except ParamValidationError as exc:
        # Airflow validates params while creating the run, before any task is scheduled.
        first_paragraph = str(exc).split("\n\n", 1)[0].strip()
        return _summary(dag_id, "rejected", started, message=first_paragraph)
    finally:
        listeners.pm.unregister(recorder)  # a session runs more DAGs in this process

    tasks = {ti.task_id: _state(ti.state) for ti in dag_run.get_task_instances()}
    return _summary(
        dag_id,
        _state(dag_run.state),
        started,
        run_id=dag_run.run_id,
        tasks=tasks,
        returns=_returns(dag_id, dag_run.run_id),
        errors={
            task_id: recorder.errors.get(task_id, "failed (no exception captured; see the log)")
            for task_id, state in tasks.items()
            if state == "failed"
        },
    )


def _state(state: Any) -> str:
    return "none" if state is None else str(getattr(state, "value", state))


def _returns(dag_id: str, run_id: str) -> dict[str, Any]:
    from airflow.models.xcom import XComModel
    from airflow.utils.session import create_session

    with create_session() as session:
        # Airflow annotates get_many as selecting 1-tuples; scalars() yields the models themselves.
        rows: list[Any] = list(session.scalars(XComModel.get_many(run_id=run_id, dag_ids=dag_id, key="return_value")))
        return {row.task_id: XComModel.deserialize_value(row) for row in rows}
