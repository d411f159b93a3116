"""The whole pipeline end to end, as `make demo` runs it, on a small case.

Runs the real CLI in a child process: a fresh AIRFLOW_HOME, every DAG through ``dag.test()``,
local Spark, GX contracts, darts and BoTorch training, MLflow on SQLite, decisions on the twin,
and the report. Asserts on what a user reads: the printed report path, at least one
reconfiguration with its reason, and the champions in the registry.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = [pytest.mark.e2e, pytest.mark.airflow, pytest.mark.spark, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]


def test_demo_runs_end_to_end_and_reports_a_reconfiguration(tmp_path):
    var_dir = tmp_path / "var" / "demo"  # where `make demo` puts it, relative to the follow-on commands' folder
    # Two seeds per report (the fewest with a spread; the demo's default is 3): the suite's longest chain stays short.
    env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1", "MLFLOW_DISABLE_TELEMETRY": "true", "FLINKTUNE_REPORT_SEEDS": "2"}
    env.pop("FLINKTUNE_VAR_DIR", None)
    started = time.monotonic()
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "flinktune.cli",
            "demo",
            "--history-hours",
            "3",
            "--tuned-hours",
            "0.5",
            "--var-dir",
            str(var_dir),
            "--seed",
            "3",
        ],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    elapsed = time.monotonic() - started
    assert proc.returncode == 0, f"demo failed after {elapsed:.0f} s:\n{proc.stdout[-4000:]}\n{proc.stderr[-4000:]}"
    match = re.search(r"^report: (.+report\.md)$", proc.stdout, re.M)
    assert match, proc.stdout
    report = Path(match.group(1))
    text = report.read_text()
    assert "## Decisions" in text
    reconf = [line for line in text.splitlines() if "| reconfigure |" in line]
    assert reconf, text
    assert all("rec/s" in line or "rollback" in line for line in reconf)  # every change says why
    summary = json.loads((report.parent / "summary.json").read_text())
    assert summary["reconfigurations"] >= 1
    for png in ("same_load.png", "rate_forecast.png", "configuration.png", "latency.png", "resources.png"):
        assert (report.parent / png).stat().st_size > 5000
    # the tuned half hour replayed under the other policies from the same state, and a verdict on that same load
    assert set(summary["same_load"]) == {"flinktune", "static", "autoscaler", "demeter"}
    assert summary["same_load"]["static"]["failures"] == summary["same_load"]["flinktune"]["failures"]
    assert "## The same load under each policy" in text and "## Verdict: " in text.splitlines()[2]
    assert len(summary["spread"]["seeds"]) == 2 and "per month over 2 seeds" in text  # FLINKTUNE_REPORT_SEEDS
    assert (report.parent / "report.html").stat().st_size > 1_000_000  # plotly.js inline: opens offline
    last = proc.stdout.strip().splitlines()[-1]
    assert last == f"verdict: {summary['verdict']['headline']}" and ("met all" in last or "MISSED" in last), last

    # the champions are in the registry the demo configured
    code = (
        "import mlflow, json; mlflow.set_tracking_uri('sqlite:///" + str(var_dir / "mlflow" / "mlflow.db") + "');"
        "c = mlflow.MlflowClient();"
        "print(json.dumps({n: c.get_model_version_by_alias(n, 'champion').version for n in "
        "['flinktune-forecaster-demo', 'flinktune-surrogate-demo']}));"
        "e = c.get_experiment_by_name('flinktune-report-demo');"
        "r = c.search_runs([e.experiment_id])[0];"
        "print(json.dumps([a.path for a in c.list_artifacts(r.info.run_id, 'report')]))"
    )
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    champions, artifacts = out.stdout.strip().splitlines()[-2:]
    assert set(json.loads(champions)) == {"flinktune-forecaster-demo", "flinktune-surrogate-demo"}
    assert {"report/report.html", "report/report.md", "report/summary.json"} <= set(json.loads(artifacts))  # the report in MLflow
    # decisions were stored durably
    import sqlite3

    with sqlite3.connect(var_dir / "state" / "flinktune.db") as con:
        reasons = [r for (r,) in con.execute("SELECT reason FROM decisions WHERE job = 'demo'")]
    early = [r for r in reasons if "decided before the next interval" in r]  # the watch's, each saying why
    assert len(reasons) - len(early) == 6 and all("so the decision is made now" in r for r in early)  # 0.5 h at 300 s

    # The README's follow-on commands, run from the folder that holds var/demo, without --var-dir.
    # The follow-on commands as a user runs them after `make demo` (no --var-dir: the demo's state is found under
    # var/demo), on a copy of that folder elsewhere: the state folder moves, the copy reports and decides on its
    # own, and the original is not touched.
    follow_env = {**env, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))}
    elsewhere = tmp_path / "elsewhere"
    copy = elsewhere / "var" / "demo"
    shutil.copytree(var_dir, copy)
    before = {p: p.stat().st_mtime_ns for p in var_dir.rglob("*") if p.is_file()}
    for args in (["report", "--job", "demo"], ["decide", "--job", "demo", "--ticks", "1", "--dry-run"]):
        step = subprocess.run(
            [sys.executable, "-m", "flinktune.cli", *args],
            cwd=elsewhere,
            env=follow_env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert step.returncode == 0, f"{args} on the copy: {step.stdout[-2000:]}\n{step.stderr[-2000:]}"
        assert "using the demo's state in var/demo/" in step.stderr, step.stderr[-2000:]
    assert not (elsewhere / "var" / "state").exists(), "nothing written outside the demo's folder"
    after = {p: p.stat().st_mtime_ns for p in var_dir.rglob("*") if p.is_file()}
    assert after == before, (
        f"the original changed: {sorted(str(p) for p in set(after) ^ set(before) | {p for p in before if after.get(p) != before[p]})[:5]}"
    )
    with sqlite3.connect(copy / "mlflow" / "mlflow.db") as con:
        uris = [u for (u,) in con.execute("SELECT artifact_uri FROM runs")]
    assert uris and all(str(var_dir) not in u for u in uris), "the copy's runs point into the copy"
