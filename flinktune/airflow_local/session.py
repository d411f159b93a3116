"""One child process that runs DAGs with ``dag.test()`` one after another.

Use :class:`DagSession` when several DAG runs share one prepared Airflow environment (the demo's
five runs): Airflow, the model libraries and Spark's JVM are imported and started once in the
child instead of once per run, which is most of a short run's time on a small machine. Each run
still gets its own log file and its own summary; a run's failure leaves the child serving the
next one, while a timeout, a Ctrl-C or a dead child ends the session (the next :meth:`run`
starts a fresh child). :func:`flinktune.airflow_local.runner.run_dag` is a session of one run.

The child is ``python -m flinktune.airflow_local.runner --serve SESSION_DIR``: it reads one
JSON request per line on stdin (``{"dag_id", "conf", "retries", "log"}``), sends Airflow's and the
tasks' output to the request's log file, and answers one JSON line (the summary described in
:mod:`flinktune.airflow_local.in_process`) on a copy of its original stdout. Its own start-up
output goes to ``SESSION_DIR/session.log``.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import selectors
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path
from types import TracebackType
from typing import IO, Any

__all__ = ["DagSession", "SessionError", "serve"]

_TAIL_LINES = 30


class SessionError(RuntimeError):
    """The child ended or ran out of time before it answered; ``log`` is the file that says why."""

    def __init__(self, message: str, *, log: str) -> None:
        super().__init__(message)
        self.log = log


class DagSession:
    """Run DAGs in one long-lived child process started with Airflow ``env``.

    ``env`` is what :func:`~flinktune.airflow_local.airflow_home.prepare_airflow_home`
    returned (plus anything the tasks need), laid over ``os.environ``. Logs go to a new folder
    under ``$AIRFLOW_HOME/logs/runner/`` (:attr:`folder`), one file per run. Use it as a context
    manager, or call :meth:`close`.
    """

    def __init__(self, env: Mapping[str, str]) -> None:
        if "AIRFLOW_HOME" not in env:
            raise ValueError("env has no AIRFLOW_HOME; build it with prepare_airflow_home(var_dir)")
        self._env = dict(env)
        root = Path(env["AIRFLOW_HOME"]) / "logs" / "runner"
        root.mkdir(parents=True, exist_ok=True)
        self.folder = Path(tempfile.mkdtemp(prefix=time.strftime("%Y%m%dT%H%M%S-"), dir=root))
        self._proc: subprocess.Popen[bytes] | None = None
        self._count = itertools.count(1)

    def __enter__(self) -> DagSession:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.close()

    def run(self, dag_id: str, conf_json: str, *, retries: int | None = None, timeout_s: float | None = None) -> dict[str, Any]:
        """Run ``dag_id`` once with the JSON object ``conf_json``; return its summary with ``"log"`` added.

        Raises :class:`SessionError` (and ends the session) when the child dies before answering or
        the run takes longer than ``timeout_s``.
        """
        log = self.folder / f"{next(self._count):02d}-{dag_id}.log"
        log.touch()
        proc = self._child()
        assert proc.stdin is not None and proc.stdout is not None
        request = {"dag_id": dag_id, "conf": json.loads(conf_json), "retries": retries, "log": str(log)}
        try:
            proc.stdin.write((json.dumps(request) + "\n").encode())
            proc.stdin.flush()
            line = _read_line(proc.stdout, timeout_s)
        except BrokenPipeError:
            line = b""
        except TimeoutError:
            self.close(kill=True)
            raise SessionError(f"DAG {dag_id} did not finish within {timeout_s:.0f} s; log: {log}", log=str(log)) from None
        except BaseException:
            self.close(kill=True)  # Ctrl-C: in its own session the child would not get the signal
            raise
        if not line:
            code = proc.wait()
            self._proc = None
            said = log if log.stat().st_size else self.folder / "session.log"
            raise SessionError(
                f"DAG {dag_id}: the runner process exited with code {code} before reporting a result; "
                f"last lines of {said}:\n{_tail(said)}",
                log=str(said),
            )
        summary: dict[str, Any] = json.loads(line)
        summary["log"] = str(log)
        return summary

    def close(self, *, kill: bool = False) -> None:
        """End the child: close its input and let it exit (``kill``: stop its whole process group now)."""
        proc, self._proc = self._proc, None
        if proc is None:
            return
        if not kill:
            with contextlib.suppress(BrokenPipeError, OSError):
                assert proc.stdin is not None
                proc.stdin.close()
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=30)
                # The child is gone; a JVM it started may outlive it in the group.
        _kill_group(proc)

    def _child(self) -> subprocess.Popen[bytes]:
        if self._proc is not None and self._proc.poll() is None:
            return self._proc
        cmd = [sys.executable, "-m", "flinktune.airflow_local.runner", "--serve", str(self.folder)]
        with open(self.folder / "session.log", "ab") as session_log:
            # Own session: on timeout the whole group goes (Spark's JVM included), nothing else.
            self._proc = subprocess.Popen(
                cmd,
                env={**os.environ, **self._env},
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=session_log,
                start_new_session=True,
            )
        return self._proc


def _read_line(stream: IO[bytes], timeout_s: float | None) -> bytes:
    """One line from the child's answer pipe, or ``b""`` at its end; TimeoutError after ``timeout_s``."""
    with selectors.DefaultSelector() as selector:
        selector.register(stream, selectors.EVENT_READ)
        if not selector.select(timeout=timeout_s):
            raise TimeoutError
    return stream.readline()  # the child writes each answer as one line, so it does not block for long


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    """Stop the child's whole process group: SIGTERM, up to 10 s grace, then SIGKILL for stragglers."""
    try:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        pass
    except ProcessLookupError:
        proc.wait()
        return  # already gone
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)  # e.g. a Spark JVM that outlived the Python child
    proc.wait()


def _tail(path: Path) -> str:
    lines = path.read_text(errors="replace").splitlines()
    return "\n".join(lines[-_TAIL_LINES:])


def serve(folder: Path) -> int:
    """The child's loop: answer each request on stdin until it closes (see the module doc)."""
    from flinktune.airflow_local.in_process import run_in_process  # imports Airflow: child only

    answers = os.fdopen(os.dup(1), "w")  # stdout itself becomes each run's log
    sys.stdout.flush()
    os.dup2(2, 1)  # until the first request: the session log
    for line in sys.stdin:
        request = json.loads(line)
        sys.stdout.flush()
        sys.stderr.flush()
        with open(request["log"], "ab") as log:
            os.dup2(log.fileno(), 1)
            os.dup2(log.fileno(), 2)
        summary = run_in_process(request["dag_id"], request["conf"], retries=request["retries"])
        sys.stdout.flush()
        sys.stderr.flush()
        answers.write(json.dumps(summary, default=str) + "\n")
        answers.flush()
    return 0
