"""Log a report folder to MLflow, after one short check that the tracking server answers at all.

Use :func:`tracking_unreachable` before writing a report (its answer, when not empty, is the line
the report states instead of being logged) and :func:`log_report` after, only when it was
reachable. The check is one bounded attempt: an HTTP(S) server must answer ``GET <uri>/health``
with any status, a database server accept a TCP connection, within the request timeout
(``FLINKTUNE_TIMEOUT_MLFLOW_REQUEST_S``). A refused port fails at once and a silent one after that
timeout, where MLflow's own client would retry with back-off.
"""

from __future__ import annotations

import http.client
import logging
import socket
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from flinktune.redaction import redact

__all__ = ["DEFAULT_PORTS", "log_report", "tracking_unreachable"]

log = logging.getLogger(__name__)

#: The port each remote tracking scheme (an HTTP server, a database) uses when the URI names none.
DEFAULT_PORTS: dict[str, int] = {"postgresql": 5432, "mysql": 3306, "mssql": 1433, "http": 80, "https": 443}


def _shown(uri: str) -> str:
    """``uri`` without its user and password (they never reach a message)."""
    parts = urlsplit(uri)
    host = parts.hostname or ""
    return f"{parts.scheme}://{host}{f':{parts.port}' if parts.port else ''}{parts.path}"


def _why(exc: BaseException) -> str:
    if isinstance(exc, (TimeoutError, socket.timeout)):
        return "no answer"
    if isinstance(exc, ConnectionRefusedError):
        return "connection refused"
    return redact(" ".join(str(exc).split())[:200]) or type(exc).__name__


def tracking_unreachable(uri: str, timeout_s: float) -> str:
    """Empty when the tracking store at ``uri`` answers within ``timeout_s``, else one line saying why not.

    A local store (``sqlite:///``, ``file:``, a path) always answers; its errors show when logging."""
    parts = urlsplit(uri)
    scheme = parts.scheme.lower().split("+")[0]
    if scheme not in DEFAULT_PORTS or not parts.hostname:
        return ""
    try:
        port = parts.port or DEFAULT_PORTS[scheme]
    except ValueError as exc:  # a port that is not a number: the settings refuse it first, but say so
        return f"MLflow at {_shown(uri)}: {redact(str(exc))}"
    try:
        if scheme in ("http", "https"):
            cls = http.client.HTTPSConnection if scheme == "https" else http.client.HTTPConnection
            conn = cls(parts.hostname, port, timeout=timeout_s)
            try:  # any HTTP answer will do: what the logging then gets is MLflow's to say
                conn.request("GET", parts.path.rstrip("/") + "/health")
                conn.getresponse().close()
            finally:
                conn.close()
        else:
            socket.create_connection((parts.hostname, port), timeout=timeout_s).close()
    except (OSError, http.client.HTTPException) as exc:
        return f"MLflow at {_shown(uri)} did not answer within {timeout_s:g} s ({_why(exc)})"
    return ""


def log_report(
    folder: Path,
    summary: dict[str, Any],
    job: str,
    *,
    tracking_uri: str,
    artifact_root: str | Path,
    request_timeout_s: float,
    retries: int,
) -> tuple[str | None, str]:
    """Log ``folder`` as artifacts of a run in ``flinktune-report-<job>``: (run id, "") or (None, why not)."""
    try:
        import mlflow

        from models.registry import configure, ensure_experiment

        configure(tracking_uri, artifact_root, request_timeout_s=request_timeout_s, max_retries=retries)
        with mlflow.start_run(experiment_id=ensure_experiment(f"flinktune-report-{job}"), run_name=folder.name) as run:
            mlflow.log_artifacts(str(folder), artifact_path="report")
            verdict = summary["verdict"]
            mlflow.set_tags({"verdict": "met" if verdict["met"] else "missed", "verdict.headline": verdict["headline"][:5000]})
            same = (summary.get("same_load") or {}).get(summary.get("same_load_policy", ""), {})
            metrics = {f"same_load.{k}": float(v) for k, v in same.items() if isinstance(v, (int, float))}
            mlflow.log_metrics({"hours": float(summary["hours"]), **metrics})
            return run.info.run_id, ""
    except Exception as exc:  # the report on disk is what matters; say why MLflow did not get it
        why = f"MLflow at {_shown(tracking_uri)} failed: {redact(' '.join(str(exc).split())[:300])}"
        log.warning("report for %s written without the MLflow logging: %s", job, why)
        return None, why
