"""The production rehearsal's short form: ``flinktune rehearse --minutes 2`` with every real part
(two Flink clusters and jobs, Prometheus, MLflow on PostgreSQL, Spark standalone, Airflow 3 with
an api-server, scheduler, dag-processor and three Celery workers on Redis, one for decisions), checked on what really
happened: Celery workers ran the DAGs' tasks, metrics went from Prometheus into the lake, the
decide DAG stored decisions with reasons, and nothing was left running.

Needs PostgreSQL (127.0.0.1:5432, trust, user postgres), Redis (127.0.0.1:6379), the prometheus
binary, Java 17 and scripts/setup_local_flink.sh (the ``flink_setup`` fixture runs it); skips
naming what is missing. Most of its time is the stack's start (about 3-4 minutes on 2 shared cores).
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.e2e, pytest.mark.airflow, pytest.mark.flink, pytest.mark.servers,
              pytest.mark.timeout(1200)]
REPO = Path(__file__).resolve().parents[3]


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
        return True
    except ProcessLookupError:
        return False


def _answers(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1):
            return True
    except OSError:
        return False


@pytest.fixture(scope="module")
def flink_setup():
    """The local Flink distribution and the benchmark jar (as tests/flinktune/localflink/conftest.py has them)."""
    if shutil.which("java") is None or shutil.which("javac") is None:
        pytest.skip("Java (JDK 17 with javac) is missing")
    proc = subprocess.run(["bash", str(REPO / "scripts" / "setup_local_flink.sh")], cwd=REPO, capture_output=True, text=True,
                          timeout=480)  # fmt: skip
    if proc.returncode != 0:
        pytest.skip(f"scripts/setup_local_flink.sh failed: {proc.stderr.strip()[-300:]}")
    jar = REPO / "var" / "localflink" / "flinkjob.jar"
    if not jar.exists():
        pytest.skip(f"the benchmark jar {jar} was not built")
    return jar


def test_short_rehearsal_runs_the_chain_unattended_and_stops_everything(tmp_path: Path, flink_setup: Path) -> None:
    for port, what in ((5432, "PostgreSQL"), (6379, "Redis")):
        if not _answers(port):
            pytest.skip(f"no {what} at 127.0.0.1:{port}")
    if not (os.environ.get("FLINKTUNE_PROMETHEUS_BIN") or shutil.which("prometheus")):
        pytest.skip("no prometheus binary (apt-get install prometheus)")
    var = tmp_path / "r"
    env = {**os.environ, "PYTHONPATH": str(REPO), "SPARK_LOCAL_IP": "127.0.0.1", "MLFLOW_DISABLE_TELEMETRY": "true"}
    proc = subprocess.run([sys.executable, "-m", "flinktune.cli.main", "rehearse", "--minutes", "2", "--var-dir", str(var),
                           "--jar", str(flink_setup), "--ingest-every-s", "20"],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=1100)  # fmt: skip
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-4000:]
    summary = json.loads((var / "rehearsal" / "rehearsal.json").read_text())

    # Nothing left: every server's process group and every Flink JVM is gone.
    assert summary["left_running"] == []
    gone_by = time.monotonic() + 15  # SIGKILLed children are reaped by init a moment later
    groups = list(summary["pids"].values())
    while groups and time.monotonic() < gone_by:
        groups = [pgid for pgid in groups if _group_alive(pgid)]
        time.sleep(0.5)
    assert groups == [], f"process groups left: {groups}"
    # The Celery workers (not a local executor) ran the scheduled tasks: each worker's own log says so. Workers
    # 1 and 2 serve the default queue (ingest, training); worker 3 only the decide queue, and it ran the decisions.
    ran = summary["celery_workers_ran"]
    assert set(ran) == {"celery-worker-1", "celery-worker-2", "celery-worker-3"} and sum(ran.values()) >= 4, ran
    assert ran["celery-worker-3"] >= 2, ran  # at least one decide run: its fleet and decide tasks
    ingest, decide = summary["tasks"]["by_dag"]["flinktune_ingest"], summary["tasks"]["by_dag"]["flinktune_decide"]
    assert ingest.get("collect:success", 0) >= 2, ingest  # at least one run, one mapped extract per job
    assert decide.get("decide:success", 0) >= 1, decide
    for name, job in summary["jobs"].items():
        # Metrics came from Prometheus (the Flink reporter) into the raw lake.
        assert job["raw_rows"] > 0, name
        assert job["latency_p95_ms_median"] is not None, name
    # At least one decision, each with its reason.
    decided = [j for j in summary["jobs"].values() if j["decisions"] > 0]
    assert decided and all(j["decisions_with_reason"] == j["decisions"] for j in decided), summary["jobs"]
