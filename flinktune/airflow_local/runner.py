"""Run flinktune's DAGs locally with ``dag.test()`` in a child process, no scheduler needed.

Use :func:`run_pipeline` for a sequence of DAG runs (prepare ``<var_dir>/airflow`` once, run the DAGs
in order in one child, stop at the first failure), :class:`LocalPipeline` when the next steps depend on
what the first ones returned (the demo), and :func:`run_dag` for one DAG with an environment you prepared
with :func:`flinktune.airflow_local.airflow_home.prepare_airflow_home`. Airflow reads its
configuration when first imported, so the DAGs run in a child process started with that environment
(:mod:`flinktune.airflow_local.session`); each run's output (Airflow and task logs) goes to its own
log file under ``$AIRFLOW_HOME/logs/runner/``; errors name that file.

From a shell::

    python -m flinktune.airflow_local.runner --dag flinktune_decide --conf '{"ticks": 3}' --var-dir var
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any, TextIO, TypedDict, Unpack

from flinktune.airflow_local.airflow_home import prepare_airflow_home
from flinktune.airflow_local.session import DagSession, SessionError

__all__ = ["DagParamsError", "DagRunError", "LocalPipeline", "PipelineOptions", "main", "run_dag", "run_pipeline"]


class DagRunError(RuntimeError):
    """A DAG run did not succeed. ``dag_id``, ``task_id`` (first failed task, if any), ``summary``, ``log``."""

    def __init__(
        self,
        message: str,
        *,
        dag_id: str,
        task_id: str | None = None,
        summary: dict[str, Any] | None = None,
        log: str | None = None,
    ) -> None:
        super().__init__(message)
        self.dag_id, self.task_id, self.summary, self.log = dag_id, task_id, summary or {}, log


class DagParamsError(DagRunError):
    """The run's params were rejected (bad value or unknown name) before any task ran."""


def run_dag(
    dag_id: str,
    conf: Mapping[str, Any],
    env: Mapping[str, str],
    *,
    retries: int | None = None,
    timeout_s: float | None = None,
    session: DagSession | None = None,
) -> dict[str, Any]:
    """Run ``dag_id`` once with ``conf`` in a child process using Airflow ``env``; return its summary.

    ``env`` is what :func:`prepare_airflow_home` returned (plus any other variables the tasks
    need); it is laid over ``os.environ``. The summary is the dict described in
    :mod:`flinktune.airflow_local.in_process` plus ``"log"`` (the run's log file). ``retries``
    overrides every task's retries (``None``: the DAG's own). ``session`` runs it in that session's
    child (``env`` is then the session's); without one a fresh child runs it alone. Raises
    :class:`DagParamsError` when params are rejected, :class:`DagRunError` naming the failed task(s)
    and their exception messages when the run fails, the DAG is missing, or the child dies or times out.
    """
    if not isinstance(conf, Mapping):
        raise TypeError(f"conf for DAG {dag_id!r} must be a mapping of param names to values, got {type(conf).__name__}")
    try:
        conf_json = json.dumps(dict(conf))
    except (TypeError, ValueError) as exc:
        raise TypeError(f"conf for DAG {dag_id!r} is not JSON-serialisable: {exc}") from None
    if session is None:
        with DagSession(env) as own:
            return run_dag(dag_id, conf, env, retries=retries, timeout_s=timeout_s, session=own)
    try:
        summary = session.run(dag_id, conf_json, retries=retries, timeout_s=timeout_s)
    except SessionError as exc:
        raise DagRunError(str(exc), dag_id=dag_id, log=exc.log) from None
    _raise_unless_success(summary)
    return summary


def _raise_unless_success(summary: dict[str, Any]) -> None:
    dag_id, state, log = summary["dag_id"], summary["state"], summary["log"]
    if state == "success":
        return
    if state == "rejected":
        raise DagParamsError(
            f"DAG {dag_id} rejected its params before any task ran: {summary['message']}", dag_id=dag_id, summary=summary, log=log
        )
    errors: dict[str, str] = summary.get("errors") or {}
    if errors:
        failed = "; ".join(f"task {task} failed: {message}" for task, message in errors.items())
        raise DagRunError(
            f"DAG {dag_id} {state}: {failed} (log: {log})", dag_id=dag_id, task_id=next(iter(errors)), summary=summary, log=log
        )
    detail = summary.get("message") or f"task states {summary.get('tasks')}"
    raise DagRunError(f"DAG {dag_id} {state}: {detail} (log: {log})", dag_id=dag_id, summary=summary, log=log)


class PipelineOptions(TypedDict, total=False):
    """The keyword options :func:`run_pipeline` passes on to :class:`LocalPipeline` (see its doc)."""

    retries: int | None
    timeout_s: float | None
    dags_folder: str | Path | None
    env: Mapping[str, str] | None
    out: TextIO | None
    database_url: str | None


class LocalPipeline:
    """Prepare ``<var_dir>/airflow`` once, then run steps of ``(dag_id, conf)`` in one child process.

    Use it as a context manager when a later step needs what an earlier one returned; otherwise
    :func:`run_pipeline` does the same in one call. :meth:`run` prints one progress line per step
    to ``out`` (default stdout), e.g. ``[2/4] flinktune_train ... ok in 23 s``, stops at the first
    failure and re-raises its :class:`DagRunError` / :class:`DagParamsError` with the step, DAG and
    task in the message. The tasks see ``FLINKTUNE_VAR_DIR=<var_dir>`` so that the jobs write under
    the same folder. ``retries`` defaults to 0 here so that a broken step fails at once (see
    :func:`run_dag`); ``timeout_s`` bounds each step; ``dags_folder`` defaults to this repository's
    ``dags/``; ``env`` holds extra variables for the tasks and wins over everything above;
    ``database_url`` puts Airflow's metadata database on a server (see :func:`prepare_airflow_home`).
    """

    def __init__(
        self,
        var_dir: str | Path,
        *,
        retries: int | None = 0,
        timeout_s: float | None = None,
        dags_folder: str | Path | None = None,
        env: Mapping[str, str] | None = None,
        out: TextIO | None = None,
        database_url: str | None = None,
    ) -> None:
        self.var_dir, self.retries, self.timeout_s = var_dir, retries, timeout_s
        self.dags_folder, self.extra_env, self.database_url = dags_folder, env, database_url
        self.out = out or sys.stdout
        self._session: DagSession | None = None

    def __enter__(self) -> LocalPipeline:
        started = time.monotonic()
        child_env = {
            **prepare_airflow_home(self.var_dir, dags_folder=self.dags_folder, database_url=self.database_url),
            "FLINKTUNE_VAR_DIR": str(Path(self.var_dir).resolve()),
        }
        for key, value in {"SPARK_LOCAL_IP": "127.0.0.1", "MLFLOW_DISABLE_TELEMETRY": "true"}.items():
            if key not in os.environ:
                child_env[key] = value  # local-only defaults; the caller's own setting wins
        child_env.update(self.extra_env or {})
        self._session = DagSession(child_env)
        self._env = child_env
        print(
            f"airflow home {child_env['AIRFLOW_HOME']} ... ready in {time.monotonic() - started:.0f} s", file=self.out, flush=True
        )
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        if self._session is not None:
            self._session.close()
            self._session = None

    def run(self, steps: Sequence[tuple[str, Mapping[str, Any]]]) -> list[dict[str, Any]]:
        """Run ``steps`` in order; return their summaries (see the class doc)."""
        _check_steps(steps)
        if self._session is None:
            raise RuntimeError("LocalPipeline.run outside its `with` block")
        summaries = []
        for index, (dag_id, conf) in enumerate(steps, start=1):
            print(f"[{index}/{len(steps)}] {dag_id} ...", end=" ", file=self.out, flush=True)
            step_started = time.monotonic()
            try:
                summaries.append(
                    run_dag(dag_id, conf, self._env, retries=self.retries, timeout_s=self.timeout_s, session=self._session)
                )
            except DagRunError as exc:
                print(f"FAILED in {time.monotonic() - step_started:.0f} s", file=self.out, flush=True)
                raise type(exc)(
                    f"pipeline stopped at step {index}/{len(steps)}: {exc}",
                    dag_id=exc.dag_id,
                    task_id=exc.task_id,
                    summary=exc.summary,
                    log=exc.log,
                ) from None
            print(f"ok in {time.monotonic() - step_started:.0f} s", file=self.out, flush=True)
        return summaries


def _check_steps(steps: Sequence[tuple[str, Mapping[str, Any]]]) -> None:
    for index, step in enumerate(steps, start=1):
        if not (isinstance(step, tuple) and len(step) == 2 and isinstance(step[0], str) and isinstance(step[1], Mapping)):
            raise TypeError(f"pipeline step {index} must be a (dag_id, conf dict) pair, got {step!r}")


def run_pipeline(
    steps: Sequence[tuple[str, Mapping[str, Any]]], var_dir: str | Path, **options: Unpack[PipelineOptions]
) -> list[dict[str, Any]]:
    """Run each ``(dag_id, conf)`` of ``steps`` in order in one child; return the summaries.

    The arguments and the progress lines are :class:`LocalPipeline`'s; malformed steps are refused
    before anything is prepared.
    """
    _check_steps(steps)
    with LocalPipeline(var_dir, **options) as pipeline:
        return pipeline.run(steps)


def main(argv: list[str] | None = None) -> int:
    """CLI: run one DAG (``--var-dir``), or, with ``--serve``, be the child a :class:`DagSession` starts."""
    parser = argparse.ArgumentParser(prog="python -m flinktune.airflow_local.runner", description=main.__doc__)
    parser.add_argument("--dag", help="DAG id, e.g. flinktune_decide")
    parser.add_argument("--conf", default="{}", help="run conf as a JSON object")
    parser.add_argument("--var-dir", default="var", help="flinktune's var folder (AIRFLOW_HOME = <var-dir>/airflow)")
    parser.add_argument("--retries", type=int, default=None, help="override every task's retries")
    parser.add_argument("--serve", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.serve is not None:
        from flinktune.airflow_local.session import serve

        return serve(args.serve)
    if not args.dag:
        parser.error("--dag is required")
    try:
        conf = json.loads(args.conf)
    except ValueError as exc:
        parser.error(f"--conf is not valid JSON: {exc}")
    if not isinstance(conf, dict):
        parser.error(f"--conf must be a JSON object, got {type(conf).__name__}")
    try:
        [summary] = run_pipeline([(args.dag, conf)], args.var_dir, retries=args.retries)
    except DagRunError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print(json.dumps(summary, indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
