"""The production rehearsal's short form: ``flinktune rehearse --minutes 2`` with every real part
(two Flink clusters and jobs, Prometheus, MLflow on PostgreSQL, Spark standalone, Airflow 3 with
an api-server, scheduler, dag-processor and three Celery workers on Redis, one for decisions), checked on what really
happened: Celery workers ran the DAGs' tasks, metrics went from Prometheus into the lake, the
decide DAG stored decisions with reasons, and nothing was left running.

While the stack starts, the same run proves the ETL on its Spark standalone cluster (a master and
two workers from the distribution inside pyspark) writes curated features identical to
``local[2]``'s: ``python -m jobs.etl_features`` runs on ``local[2]`` (niced) from the start and on
the rehearsal's master once it prints it (while Airflow starts, before DAG tasks want the workers),
each in its own process and var folder, on one seeded synthetic hour. One cluster start serves both.

Needs PostgreSQL (127.0.0.1:5432, trust, user postgres), Redis (127.0.0.1:6379), the prometheus
binary, Java 17 and scripts/setup_local_flink.sh (the ``flink_setup`` fixture runs it); skips
naming what is missing. Most of its time is the stack's start (about 3-4 minutes on 2 shared cores).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

from flinktune.etl.synthetic import synthetic_raw
from flinktune.lake import Lake

pytestmark = [
    pytest.mark.slow,
    pytest.mark.e2e,
    pytest.mark.airflow,
    pytest.mark.flink,
    pytest.mark.spark,
    pytest.mark.servers,
    pytest.mark.timeout(1200),
]
REPO = Path(__file__).resolve().parents[3]
ETL_JOB = "standalone"


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


def _start_etl(var: Path, master: str, niceness: int = 0) -> subprocess.Popen:
    """``python -m jobs.etl_features`` on one seeded synthetic hour in ``var``'s own lake, on ``master``
    (``niceness`` > 0: on the CPU the stack's starts leave idle, so it slows none of their timeouts)."""
    Lake(var / "lake").write_raw(synthetic_raw(ETL_JOB, 1_700_000_000_000, 600, vertices=2, subtasks=2, seed=5))
    env = {**os.environ, "PYTHONPATH": str(REPO), "FLINKTUNE_VAR_DIR": str(var), "FLINKTUNE_SPARK_MASTER": master,
           "SPARK_LOCAL_IP": "127.0.0.1", "MLFLOW_DISABLE_TELEMETRY": "true"}  # fmt: skip
    if master.startswith("spark://"):
        env["FLINKTUNE_SPARK_CONF"] = json.dumps({"spark.executor.memory": "512m", "spark.executor.cores": "1",
                                                  "spark.cores.max": "2", "spark.driver.host": "127.0.0.1",
                                                  "spark.driver.bindAddress": "127.0.0.1"})  # fmt: skip
    # Files, not pipes: Spark's stderr would fill a pipe while the test waits on the rehearsal.
    with open(var.parent / f"{var.name}-etl.out", "w") as out, open(var.parent / f"{var.name}-etl.err", "w") as err:
        return subprocess.Popen([sys.executable, "-m", "jobs.etl_features", "--job", ETL_JOB], cwd=REPO, env=env,
                                stdout=out, stderr=err, preexec_fn=(lambda: os.nice(niceness)) if niceness else None)  # fmt: skip


def _etl_result(proc: subprocess.Popen, var: Path, master: str) -> dict:
    """Wait for an ETL of :func:`_start_etl`; its summary line (the last line it printed)."""
    proc.wait(timeout=300)
    out, err = (var.parent / f"{var.name}-etl.out").read_text(), (var.parent / f"{var.name}-etl.err").read_text()
    assert proc.returncode == 0, f"ETL on {master} failed:\n{err[-3000:]}"
    return json.loads(out.strip().splitlines()[-1])


def _curated(var: Path, dataset: str) -> pd.DataFrame:
    frames = Lake(var / "lake").read_dataset(dataset, ETL_JOB)
    assert frames, f"no {dataset} written under {var}"
    df = pd.concat(frames, ignore_index=True)
    return df.sort_values("window_start").reset_index(drop=True)


def _spark_master(proc: subprocess.Popen, log: Path, deadline: float) -> str | None:
    """The rehearsal's Spark master as it prints it once its workers registered; None if it ended first."""
    while time.monotonic() < deadline and proc.poll() is None:
        found = re.search(r"Spark standalone (spark://\S+) with", log.read_text(errors="replace"))
        if found:
            return found.group(1)
        time.sleep(1)
    return None


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
    env = {**os.environ, "PYTHONPATH": str(REPO), "SPARK_LOCAL_IP": "127.0.0.1", "MLFLOW_DISABLE_TELEMETRY": "true",
           "PYTHONUNBUFFERED": "1"}  # fmt: skip
    log = tmp_path / "rehearse.log"
    deadline = time.monotonic() + 1100
    with open(log, "w") as out:
        proc = subprocess.Popen([sys.executable, "-m", "flinktune.cli.main", "rehearse", "--minutes", "2", "--var-dir",
                                 str(var), "--jar", str(flink_setup), "--ingest-every-s", "20"],
                                cwd=REPO, env=env, stdout=out, stderr=subprocess.STDOUT)  # fmt: skip
    etls: list[subprocess.Popen] = []
    try:
        # The local[2] ETL runs niced while the stack starts; the standalone one once the cluster is there.
        etls.append(local_etl := _start_etl(tmp_path / "local", "local[2]", niceness=10))
        master = _spark_master(proc, log, deadline)
        standalone_etl = _start_etl(tmp_path / "standalone", master) if master else None
        etls += [standalone_etl] if standalone_etl else []
        local = _etl_result(local_etl, tmp_path / "local", "local[2]")
        standalone = _etl_result(standalone_etl, tmp_path / "standalone", master) if master and standalone_etl else None
        proc.wait(timeout=max(1.0, deadline - time.monotonic()))
    finally:
        for etl in etls:  # only after a failed wait: a finished ETL has exited
            if etl.poll() is None:
                etl.kill()
                etl.wait()
        if proc.poll() is None:  # SIGTERM: the rehearsal stops everything it started, then exits
            proc.terminate()
            proc.wait(timeout=120)
    out_text = log.read_text(errors="replace")
    assert proc.returncode == 0, out_text[-4000:]
    assert master and standalone is not None, f"the rehearsal printed no Spark master:\n{out_text[-4000:]}"
    summary = json.loads((var / "rehearsal" / "rehearsal.json").read_text())

    # The ETL on the rehearsal's Spark standalone cluster wrote the same curated features as local[2].
    for dataset in ("features_10s", "features_1m"):
        a, b = _curated(tmp_path / "standalone", dataset), _curated(tmp_path / "local", dataset)
        assert len(a) > 0
        pd.testing.assert_frame_equal(a[sorted(a.columns)], b[sorted(b.columns)], check_exact=False, rtol=1e-12)
    assert {k: v for k, v in standalone.items() if "rows" in k} == {k: v for k, v in local.items() if "rows" in k}

    # Nothing left: every server's process group (Spark's master and workers among them) and every Flink JVM is gone.
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
