"""The ETL on a Spark standalone cluster (a master and two workers from the distribution inside
pyspark, as the rehearsal starts them) writes curated features identical to ``local[2]``'s.

Each ETL runs in its own process (``python -m jobs.etl_features``) so that each gets its own
driver on its own master; the raw input is one seeded synthetic hour, the same in both lakes.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

from flinktune.etl.synthetic import synthetic_raw
from flinktune.lake import Lake
from flinktune.rehearsal.servers import Stack
from flinktune.rehearsal.stack import _spark
from tests.flinktune.rehearsal.test_rehearsal_short import _group_alive

pytestmark = [pytest.mark.spark, pytest.mark.slow, pytest.mark.servers, pytest.mark.timeout(420)]
REPO = Path(__file__).resolve().parents[3]
JOB = "standalone"


def _etl(var: Path, master: str) -> dict:
    lake = Lake(var / "lake")
    lake.write_raw(synthetic_raw(JOB, 1_700_000_000_000, 600, vertices=2, subtasks=2, seed=5))
    env = {**os.environ, "PYTHONPATH": str(REPO), "FLINKTUNE_VAR_DIR": str(var), "FLINKTUNE_SPARK_MASTER": master,
           "SPARK_LOCAL_IP": "127.0.0.1", "MLFLOW_DISABLE_TELEMETRY": "true"}  # fmt: skip
    if master.startswith("spark://"):
        env["FLINKTUNE_SPARK_CONF"] = json.dumps({"spark.executor.memory": "512m", "spark.executor.cores": "1",
                                                  "spark.cores.max": "2", "spark.driver.host": "127.0.0.1",
                                                  "spark.driver.bindAddress": "127.0.0.1"})  # fmt: skip
    proc = subprocess.run([sys.executable, "-m", "jobs.etl_features", "--job", JOB], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=300)  # fmt: skip
    assert proc.returncode == 0, f"ETL on {master} failed:\n{proc.stderr[-3000:]}"
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _curated(var: Path, dataset: str) -> pd.DataFrame:
    frames = Lake(var / "lake").read_dataset(dataset, JOB)
    assert frames, f"no {dataset} written under {var}"
    df = pd.concat(frames, ignore_index=True)
    return df.sort_values("window_start").reset_index(drop=True)


def test_curated_output_on_a_standalone_cluster_equals_local(tmp_path: Path) -> None:
    with Stack(tmp_path / "logs", log=lambda _: None) as stack:
        master = _spark(stack, tmp_path, dict(os.environ), workers=2)
        standalone = _etl(tmp_path / "standalone", master)
        pids = [s.pid for s in stack.servers]
    gone_by = time.monotonic() + 15  # SIGKILLed executors are reaped by init a moment later
    left = pids
    while left and time.monotonic() < gone_by:
        left = [pid for pid in pids if _group_alive(pid)]
        time.sleep(0.5)
    assert left == [], "the stack stopped every process group it started"
    local = _etl(tmp_path / "local", "local[2]")
    for dataset in ("features_10s", "features_1m"):
        a, b = _curated(tmp_path / "standalone", dataset), _curated(tmp_path / "local", dataset)
        assert len(a) > 0
        pd.testing.assert_frame_equal(a[sorted(a.columns)], b[sorted(b.columns)], check_exact=False, rtol=1e-12)
    assert {k: v for k, v in standalone.items() if "rows" in k} == {k: v for k, v in local.items() if "rows" in k}
