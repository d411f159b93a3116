"""Run flinktune's DAGs locally with ``dag.test()``, each in a fresh process, no scheduler needed.

Use :func:`run_pipeline` for the demo (prepare ``<var_dir>/airflow`` once, run DAGs in order, stop
at the first failure) and :func:`run_dag` for one DAG with an environment you prepared with
:func:`flinktune.orchestration.local.airflow_home.prepare_airflow_home`. Airflow reads its configuration
when first imported, so every DAG runs in a child process started with that environment:
``python -m flinktune.orchestration.local.runner --in-process ...``. The child's output (Airflow and task
logs) goes to a log file under ``$AIRFLOW_HOME/logs/runner/``; errors name that file.

From a shell::

    python -m flinktune.orchestration.local.runner --dag flinktune_decide --conf '{"ticks": 3}' --var-dir var
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, TextIO

from flinktune.lake.atomic import atomic_write
from flinktune.orchestration.local.airflow_home import prepare_airflow_home

__all__ = ["DagParamsError", "DagRunError", "main", "run_dag", "run_pipeline"]

_TAIL_LINES = 30


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
) -> dict[str, Any]:
    """Run ``dag_id`` once with ``conf`` in a child process using Airflow ``env``; return its summary.

    ``env`` is what :func:`prepare_airflow_home` returned (plus any other variables the tasks
    need); it is laid over ``os.environ``. The summary is the dict described in
    :mod:`flinktune.orchestration.local.in_process` plus ``"log"`` (the child's log file). ``retries``
    overrides every task's retries (``None``: the DAG's own). Raises :class:`DagParamsError` when
    params are rejected, :class:`DagRunError` naming the failed task(s) and their exception
    messages when the run fails, the DAG is missing, or the child dies or times out.
    """
    if not isinstance(conf, Mapping):
        raise TypeError(f"conf for DAG {dag_id!r} must be a mapping of param names to values, got {type(conf).__name__}")
    try:
        conf_json = json.dumps(dict(conf))
    except (TypeError, ValueError) as exc:
        raise TypeError(f"conf for DAG {dag_id!r} is not JSON-serialisable: {exc}") from None
    if "AIRFLOW_HOME" not in env:
        raise ValueError("env has no AIRFLOW_HOME; build it with prepare_airflow_home(var_dir)")

    log_dir = Path(env["AIRFLOW_HOME"]) / "logs" / "runner"
    log_dir.mkdir(parents=True, exist_ok=True)
    stamp = time.strftime("%Y%m%dT%H%M%S")
    log_fd, log_name = tempfile.mkstemp(prefix=f"{dag_id}-{stamp}-", suffix=".log", dir=log_dir)
    result_path = Path(log_name).with_suffix(".json")
    cmd = [
        sys.executable,
        "-m",
        "flinktune.orchestration.local.runner",
        "--in-process",
        "--dag",
        dag_id,
        "--conf",
        conf_json,
        "--result",
        str(result_path),
    ]
    if retries is not None:
        cmd += ["--retries", str(retries)]

    with os.fdopen(log_fd, "w") as log:
        # Own session: on timeout the whole group goes (Spark's JVM included), nothing else.
        proc = subprocess.Popen(cmd, env={**os.environ, **env}, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            returncode = proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            _kill_group(proc)
            raise DagRunError(
                f"DAG {dag_id} did not finish within {timeout_s:.0f} s; log: {log_name}", dag_id=dag_id, log=log_name
            ) from None
        except BaseException:
            _kill_group(proc)  # Ctrl-C: in its own session the child would not get the signal
            raise

    if not result_path.is_file():
        raise DagRunError(
            f"DAG {dag_id}: the runner process exited with code {returncode} before reporting a result; "
            f"last lines of {log_name}:\n{_tail(log_name)}",
            dag_id=dag_id,
            log=log_name,
        )
    summary = json.loads(result_path.read_text())
    result_path.unlink()
    summary["log"] = log_name
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


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    """Stop the child's whole process group: SIGTERM, up to 10 s grace, then SIGKILL for stragglers."""
    try:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        pass
    except ProcessLookupError:
        return  # already gone
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)  # e.g. a Spark JVM that outlived the Python child
    proc.wait()


def _tail(path: str) -> str:
    lines = Path(path).read_text(errors="replace").splitlines()
    return "\n".join(lines[-_TAIL_LINES:])


def run_pipeline(
    steps: Sequence[tuple[str, Mapping[str, Any]]],
    var_dir: str | Path,
    *,
    retries: int | None = 0,
    timeout_s: float | None = None,
    dags_folder: str | Path | None = None,
    env: Mapping[str, str] | None = None,
    out: TextIO | None = None,
    database_url: str | None = None,
) -> list[dict[str, Any]]:
    """Prepare ``<var_dir>/airflow`` once, then run each ``(dag_id, conf)`` in order; return the summaries.

    Prints one progress line per step to ``out`` (default stdout), e.g.
    ``[2/4] flinktune_train ... ok in 23 s``. Stops at the first failure and re-raises its
    :class:`DagRunError` / :class:`DagParamsError` with the step, DAG and task in the message.
    The tasks see ``FLINKTUNE_VAR_DIR=<var_dir>`` so that the jobs write under the same folder.
    ``retries`` defaults to 0 here so that a broken step fails at once (see :func:`run_dag`);
    ``timeout_s`` bounds each step; ``dags_folder`` defaults to this repository's ``dags/``;
    ``env`` holds extra variables for the tasks and wins over everything above;
    ``database_url`` puts Airflow's metadata database on a server (see :func:`prepare_airflow_home`).
    """
    out = out or sys.stdout
    for index, step in enumerate(steps, start=1):
        if not (isinstance(step, tuple) and len(step) == 2 and isinstance(step[0], str) and isinstance(step[1], Mapping)):
            raise TypeError(f"pipeline step {index} must be a (dag_id, conf dict) pair, got {step!r}")

    started = time.monotonic()
    child_env = {
        **prepare_airflow_home(var_dir, dags_folder=dags_folder, database_url=database_url),
        "FLINKTUNE_VAR_DIR": str(Path(var_dir).resolve()),
    }
    for key, value in {"SPARK_LOCAL_IP": "127.0.0.1", "MLFLOW_DISABLE_TELEMETRY": "true"}.items():
        if key not in os.environ:
            child_env[key] = value  # local-only defaults; the caller's own setting wins
    child_env.update(env or {})
    print(
        f"[0/{len(steps)}] airflow home {child_env['AIRFLOW_HOME']} ... ready in {time.monotonic() - started:.0f} s",
        file=out,
        flush=True,
    )

    summaries = []
    for index, (dag_id, conf) in enumerate(steps, start=1):
        print(f"[{index}/{len(steps)}] {dag_id} ...", end=" ", file=out, flush=True)
        step_started = time.monotonic()
        try:
            summaries.append(run_dag(dag_id, conf, child_env, retries=retries, timeout_s=timeout_s))
        except DagRunError as exc:
            print(f"FAILED in {time.monotonic() - step_started:.0f} s", file=out, flush=True)
            raise type(exc)(
                f"pipeline stopped at step {index}/{len(steps)}: {exc}",
                dag_id=exc.dag_id,
                task_id=exc.task_id,
                summary=exc.summary,
                log=exc.log,
            ) from None
        print(f"ok in {time.monotonic() - step_started:.0f} s", file=out, flush=True)
    return summaries


def _in_process(dag_id: str, conf: dict[str, Any], result: Path, retries: int | None) -> int:
    from flinktune.orchestration.local.in_process import run_in_process  # imports Airflow: child only

    summary = run_in_process(dag_id, conf, retries=retries)
    atomic_write(result, json.dumps(summary, default=str, indent=1).encode())  # the parent reads only a complete result
    return 0 if summary["state"] == "success" else 1


def main(argv: list[str] | None = None) -> int:
    """CLI: run one DAG (``--var-dir``), or, with ``--in-process``, be the child :func:`run_dag` starts."""
    parser = argparse.ArgumentParser(prog="python -m flinktune.orchestration.local.runner", description=main.__doc__)
    parser.add_argument("--dag", required=True, help="DAG id, e.g. flinktune_decide")
    parser.add_argument("--conf", default="{}", help="run conf as a JSON object")
    parser.add_argument("--var-dir", default="var", help="flinktune's var folder (AIRFLOW_HOME = <var-dir>/airflow)")
    parser.add_argument("--retries", type=int, default=None, help="override every task's retries")
    parser.add_argument("--in-process", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--result", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    try:
        conf = json.loads(args.conf)
    except ValueError as exc:
        parser.error(f"--conf is not valid JSON: {exc}")
    if not isinstance(conf, dict):
        parser.error(f"--conf must be a JSON object, got {type(conf).__name__}")

    if args.in_process:
        if args.result is None:
            parser.error("--in-process needs --result")
        return _in_process(args.dag, conf, args.result, args.retries)
    try:
        [summary] = run_pipeline([(args.dag, conf)], args.var_dir, retries=args.retries)
    except DagRunError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print(json.dumps(summary, indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
