"""``flinktune demo --jobs 2`` end to end on a small case: two twin jobs as one fleet, two reports, one overview.

Runs the real CLI in a child process (every DAG through ``dag.test()``, Spark, MLflow on SQLite,
decisions on the twin, the reports). Asserts on what a user reads: two distinct report pages,
each of its own job, kind and load, and an overview whose rows link to them and repeat their
figures (verdict, CPU and money against static on the same load, changes).
"""

from __future__ import annotations

import html
import json
import os
import re
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from flinktune.fleet import load_fleet_file
from flinktune.pricing import PriceList

pytestmark = [pytest.mark.e2e, pytest.mark.airflow, pytest.mark.spark, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]


def test_demo_with_two_jobs_writes_two_reports_and_an_overview_that_links_them(tmp_path):
    var_dir = tmp_path / "fleet-demo"
    # One seed per report: the spread over seeds is the single demo's test; this one is about two jobs as a fleet.
    env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1", "MLFLOW_DISABLE_TELEMETRY": "true", "FLINKTUNE_REPORT_SEEDS": "1"}
    env.pop("FLINKTUNE_VAR_DIR", None)
    proc = subprocess.run(
        [sys.executable, "-m", "flinktune.cli", "demo", "--jobs", "2", "--history-hours", "3", "--tuned-hours", "0.5",
         "--var-dir", str(var_dir), "--seed", "3"],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=1800,
    )  # fmt: skip
    assert proc.returncode == 0, f"{proc.stdout[-4000:]}\n{proc.stderr[-4000:]}"
    check_fleet_demo(var_dir, proc.stdout)


def check_fleet_demo(var_dir: Path, stdout: str) -> None:
    """What ``demo --jobs 2 --var-dir var_dir`` printed (``stdout``) and left in ``var_dir``."""
    lines = stdout.strip().splitlines()
    overview = Path(re.fullmatch(r"fleet overview: (.+overview\.html)", lines[-1]).group(1))

    # The jobs are a fleet on the twin: the fleet file the demo wrote, every job managed, kinds and loads apart.
    fleet = load_fleet_file(var_dir / "fleet.yaml")
    assert [e.name for e in fleet.entries] == ["demo-1-ysb", "demo-2-tsw"] and not fleet.held()
    assert {e.settings.mode for e in fleet.entries} == {"act"}
    printed = {
        m.group(1): m
        for line in lines
        if (m := re.fullmatch(r"(\S+) \((\w+) at ([\d.]+) x its rates\): (.+); html report: (.+)", line))
    }
    assert sorted(printed) == ["demo-1-ysb", "demo-2-tsw"]
    assert {(m.group(2), m.group(3)) for m in printed.values()} == {("ysb", "1"), ("tsw", "0.6")}

    pages = {job: Path(m.group(5)) for job, m in printed.items()}
    assert len({p.parent for p in pages.values()}) == 2
    summaries = {}
    for job, page in pages.items():
        assert page.parent.name.startswith(f"{job}-") and page.stat().st_size > 1_000_000
        summaries[job] = json.loads((page.parent / "summary.json").read_text())
        assert summaries[job]["verdict"]["headline"] == printed[job].group(4)
        assert job in (page.parent / "report.md").read_text().splitlines()[0]
    # Two jobs, two kinds and loads: their runs differ.
    assert len({json.dumps(s["same_load"]["static"], sort_keys=True) for s in summaries.values()}) == 2

    # The overview: one row per job, its link opens that job's page, its figures are the page's.
    rows = json.loads((overview.parent / "overview.json").read_text())
    text = overview.read_text()
    assert [r["job"] for r in rows] == ["demo-1-ysb", "demo-2-tsw"]
    for row in rows:
        job, s = row["job"], summaries[row["job"]]
        assert (overview.parent / row["link"]).resolve() == pages[job].resolve()
        assert f'href="{html.escape(row["link"])}"' in text
        mine, static = s["same_load"][s["same_load_policy"]], s["same_load"]["static"]
        money = PriceList(**s["prices"]).money
        report_md = (pages[job].parent / "report.md").read_text()
        assert row["verdict"] == s["verdict"]["headline"] and html.escape(row["verdict"]) in text
        assert row["cost"].startswith(f"{money(mine['priced_cost'])} vs {money(static['priced_cost'])} (")
        assert money(mine["priced_cost"]) in report_md and money(static["priced_cost"]) in report_md
        assert row["cpu"].startswith(f"{mine['cpu_core_hours']:.1f} vs {static['cpu_core_hours']:.1f} (")
        assert row["changes"] == f"{mine['reconfigurations']:.0f}"
        ratio = float(row["cpu"].split("(")[1].split(" x")[0])
        assert ratio == pytest.approx(mine["cpu_core_hours"] / static["cpu_core_hours"], abs=0.006)
    # Each job decided on its own twin every interval of its tuned half hour (and early when its watch fired).
    with sqlite3.connect(var_dir / "state" / "flinktune.db") as con:
        counts = dict(con.execute("SELECT job, COUNT(*) FROM decisions GROUP BY job"))
    assert set(counts) == set(pages) and min(counts.values()) >= 6, counts
