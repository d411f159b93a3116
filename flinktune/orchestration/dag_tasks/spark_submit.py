"""The metric ETL through ``spark-submit`` to a standalone Spark cluster (``spark://``).

Use :func:`spark_submit_command` to build the command for ``jobs/etl_features.py`` and
:func:`run_spark_submit` to run it (the ingest DAG does so when ``FLINKTUNE_SPARK_SUBMIT`` is
``client`` or ``cluster``; see :mod:`flinktune.backends.choice`). The master is
``FLINKTUNE_SPARK_MASTER``; extra properties come from ``FLINKTUNE_SPARK_CONF`` (a JSON object, as
for the in-process ETL). In ``cluster`` mode the application file is the one the workers see at
:data:`IMAGE_APP`. Spark on Kubernetes is not submitted from here: ``FLINKTUNE_SPARK_SUBMIT=kubernetes``
runs a SparkApplication through ``SparkKubernetesOperator`` (:mod:`.spark_application`).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from flinktune.settings import SettingsError, SparkSettings, read_group

__all__ = ["IMAGE_APP", "SparkSubmitError", "run_spark_submit", "spark_submit_command"]

IMAGE_APP = "local:///opt/flinktune/jobs/etl_features.py"
_REPO_APP = Path(__file__).resolve().parents[3] / "jobs" / "etl_features.py"


class SparkSubmitError(RuntimeError):
    """spark-submit is misconfigured or the application failed; the message names which and why."""


def _spark_submit_binary() -> str:
    found = shutil.which("spark-submit")
    if found:
        return found
    try:
        import pyspark  # its wheel ships bin/spark-submit
    except ImportError:
        raise SparkSubmitError("spark-submit is not on PATH and pyspark is not installed") from None
    return str(Path(pyspark.__file__).parent / "bin" / "spark-submit")


def spark_submit_command(
    job: str,
    *,
    master: str,
    deploy_mode: str,
    start_ms: int | None = None,
    end_ms: int | None = None,
    environ: Mapping[str, str] | None = None,
) -> list[str]:
    """The ``spark-submit`` argv that runs ``jobs.etl_features`` for ``job`` on ``master``."""
    env = os.environ if environ is None else environ
    if deploy_mode not in ("client", "cluster"):
        raise SparkSubmitError(f"FLINKTUNE_SPARK_SUBMIT={deploy_mode!r}: deploy mode must be 'client' or 'cluster'")
    if deploy_mode == "cluster" and master.startswith("local"):
        raise SparkSubmitError(f"FLINKTUNE_SPARK_SUBMIT=cluster needs a cluster master, not FLINKTUNE_SPARK_MASTER={master!r}")
    if master.startswith("k8s://"):
        raise SparkSubmitError(
            f"FLINKTUNE_SPARK_MASTER={master!r}: Spark on Kubernetes runs as a SparkApplication; "
            "set FLINKTUNE_SPARK_SUBMIT=kubernetes (SparkKubernetesOperator) instead of client/cluster"
        )
    try:
        conf = read_group(SparkSettings, env).properties()
    except SettingsError as exc:
        raise SparkSubmitError(str(exc)) from None
    app = IMAGE_APP if deploy_mode == "cluster" else str(_REPO_APP)
    cmd = [_spark_submit_binary(), "--master", master, "--deploy-mode", deploy_mode, "--name", f"flinktune-etl-{job}"]
    for key, value in sorted(conf.items()):
        cmd += ["--conf", f"{key}={value}"]
    cmd += [app, "--job", job]
    if start_ms is not None:
        cmd += ["--start-ms", str(int(start_ms))]
    if end_ms is not None:
        cmd += ["--end-ms", str(int(end_ms))]
    return cmd


def run_spark_submit(cmd: list[str], *, timeout_s: float = 1800, env: Mapping[str, str] | None = None) -> dict[str, Any]:
    """Run ``cmd``; return the JSON summary the ETL printed last (``{}`` in cluster mode, where the
    driver's output stays in the driver pod). Raises :class:`SparkSubmitError` with the output's tail."""
    repo = str(_REPO_APP.parents[1])
    child_env = {**os.environ, **(env or {})}
    child_env["PYTHONPATH"] = os.pathsep.join(p for p in (repo, child_env.get("PYTHONPATH", "")) if p)
    try:
        proc = subprocess.run(cmd, env=child_env, capture_output=True, text=True, timeout=timeout_s, check=False)
    except subprocess.TimeoutExpired:
        raise SparkSubmitError(f"spark-submit for {cmd[-1]} did not finish within {timeout_s:.0f} s") from None
    if proc.returncode != 0:
        tail = "\n".join((proc.stdout + proc.stderr).splitlines()[-25:])
        raise SparkSubmitError(f"spark-submit exited with code {proc.returncode}; last lines:\n{tail}")
    for line in reversed(proc.stdout.splitlines()):
        if line.startswith("{"):
            return json.loads(line)
    return {}
