"""A Celery worker whose Celery ``imports`` name the preload loads, at its start and before its pool forks, what
a decide task then needs: the task's fork parses the DAG file and checks its fresh rows against the
``raw_metrics`` contract without importing Great Expectations, MLflow or flinktune again, and no thread was
started before the fork. Each case runs in a fresh interpreter, as a worker starts."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from flinktune.airflow_local.airflow_home import airflow_env

pytestmark = [pytest.mark.slow]
REPO = Path(__file__).resolve().parents[4]
PRELOAD = "flinktune.orchestration.dag_tasks.worker_preload"

# The worker's start (Celery's loader imports its configured modules), then a decide task's work in the same process.
_WORKER_THEN_TASK = textwrap.dedent(
    """
    import importlib.util, json, sys, threading, time
    import pandas as pd
    from airflow.providers.celery.executors.celery_executor import app

    app.loader.import_default_modules()
    threads = threading.active_count()
    loaded = set(sys.modules)
    spec = importlib.util.spec_from_file_location("unusual_prefix_flinktune_decide", "dags/flinktune_decide.py")
    spec.loader.exec_module(importlib.util.module_from_spec(spec))
    from flinktune.localflink.attach import AttachError
    from flinktune.orchestration.dag_tasks import tasks

    try:  # the decide task's run up to its job's attachment, which this machine has none of
        tasks.decide({"job": "j", "policy": "ds2", "dry_run": True, "goals": {}}, ticks=1)
        stopped = None
    except AttachError as exc:
        stopped = str(exc)
    from flinktune.clock import ManualClock
    from flinktune.decision.fresh import FreshMetricsSource
    from flinktune.decision.testing import FrameMetricsSource, FrameRecentMetrics, raw_samples

    now = time.time()
    rows = raw_samples("j", int(now) - 300, 300, rate=5000.0)
    rows = pd.concat([rows, rows[rows["metric"] == "numRecordsOutPerSecond"].assign(metric="numRecordsInPerSecond")])
    rows = rows.astype({"job": "string", "metric": "string", "vertex": "string", "subtask": "int32", "ts_ms": "int64"})
    lake = FrameMetricsSource(rows[rows["ts_ms"] < (now - 60) * 1000])
    source = FreshMetricsSource(lake, FrameRecentMetrics(rows), ManualClock(now))
    source.fetch("j", int(now - 120) * 1000, int(now * 1000) + 1)
    # Every module of ours and of GX, and MLflow itself (setting its URI loads a few small modules of its tracing).
    ours = ("great_expectations", "data_contracts", "models", "flinktune")
    new = sorted(m for m in set(sys.modules) - loaded
                 if (m.split(".")[0] in ours or m == "mlflow") and m != "flinktune.decision.testing")
    print(json.dumps({"imports": list(app.conf.imports), "threads": threads, "stopped": stopped, "note": source.note,
                      "recent_rows": source.served["recent"], "new": new}))
    """
)


def _worker(tmp_path: Path, celery_config: dict[str, object] | None) -> dict[str, object]:
    env = {
        **os.environ,
        **airflow_env(tmp_path),
        "PYTHONPATH": str(REPO),
        "AIRFLOW__CORE__EXECUTOR": "CeleryExecutor",
        "FLINKTUNE_VAR_DIR": str(tmp_path / "var"),
        "FLINKTUNE_CLUSTER": "local-flink",
        "FLINKTUNE_FLINK_JOBS_DIR": str(tmp_path / "jobs"),
        "FLINKTUNE_PROMETHEUS_URL": "http://127.0.0.1:9",  # a decide run's fresh source is built; nothing asks it here
    }
    env.pop("AIRFLOW__CELERY__EXTRA_CELERY_CONFIG", None)
    if celery_config is not None:
        env["AIRFLOW__CELERY__EXTRA_CELERY_CONFIG"] = json.dumps(celery_config)
    proc = subprocess.run(
        [sys.executable, "-c", _WORKER_THEN_TASK], cwd=REPO, env=env, capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_a_preloading_worker_leaves_a_decide_task_nothing_heavy_to_import(tmp_path: Path) -> None:
    got = _worker(tmp_path, {"imports": [PRELOAD]})
    assert got["imports"] == [PRELOAD]
    assert got["threads"] == 1  # nothing running that a fork could cut off while it holds a lock
    # The run went as far as the job's attachment, the fresh rows passed the contract (GX ran), and the task
    # imported none of the heavy packages.
    assert "j.json" in str(got["stopped"]) and got["note"] is None and got["recent_rows"] > 0
    assert got["new"] == []


def test_without_the_preload_each_decide_task_imports_gx_mlflow_and_the_decision_loop(tmp_path: Path) -> None:
    got = _worker(tmp_path, None)
    assert got["imports"] == [] and "j.json" in str(got["stopped"]) and got["note"] is None
    new = set(got["new"])
    assert {
        "great_expectations",
        "mlflow",
        "flinktune.runs.decide",
        "flinktune.localflink.attach",
        "data_contracts.validate",
    } <= new
