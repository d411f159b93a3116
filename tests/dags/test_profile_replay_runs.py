"""dag.test() of the profiling and replay DAGs on small data, through the real runner and Airflow.

The profiling run maps one real ``jobs.profile`` run per configuration on the twin and then trains
and registers the surrogate in a real MLflow (SQLite in tmp); the replay run replays 15 minutes.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from flinktune.airflow_local.runner import run_pipeline

pytestmark = [pytest.mark.airflow, pytest.mark.slow]

CONFIGS = [
    {"parallelism": 8, "task_slots": 1, "cpu": 1.0, "memory_mb": 2048, "checkpoint_interval_s": 30},
    {"parallelism": 16, "task_slots": 2, "cpu": 2.0, "memory_mb": 4096, "checkpoint_interval_s": 10},
]


def test_profile_dag_maps_one_run_per_config_then_registers_the_surrogate(tmp_path: Path) -> None:
    with open(tmp_path / "progress.txt", "w") as progress:
        [summary] = run_pipeline(
            [
                (
                    "flinktune_profile",
                    {"job": "demo", "configs": CONFIGS, "rates": [30000.0, 60000.0], "duration_s": 60, "max_runs": 2},
                )
            ],
            tmp_path,
            out=progress,
            timeout_s=240,
        )
    assert summary["state"] == "success", summary
    assert summary["returns"]["suggest"] == CONFIGS
    # Both mapped instances ran; the run's XCom keeps the returns of the mapped task as a list.
    assert summary["tasks"] == {"suggest": "success", "profile": "success", "train_surrogate": "success"}
    observations = pd.concat(
        pd.read_parquet(p) for p in (tmp_path / "lake" / "curated" / "profiling_observations" / "job=demo").glob("*.parquet")
    )
    assert sorted(observations["parallelism"].unique().tolist()) == [8, 16]
    assert len(observations) == 4, "two configurations x two rates"
    surrogate = summary["returns"]["train_surrogate"]
    assert surrogate["model_name"] == "flinktune-surrogate-demo" and surrogate["version"] == "1"
    # The champions asset event names the job, so the decide run it triggers acts on that job.
    import json
    import sqlite3

    with sqlite3.connect(tmp_path / "airflow" / "airflow.db") as con:
        extras = [
            json.loads(row[0])
            for row in con.execute(
                "SELECT e.extra FROM asset_event e JOIN asset a ON a.id = e.asset_id WHERE a.uri = 'flinktune://models/champions'"
            )
        ]
    assert extras == [{"job": "demo"}], extras


def test_replay_dag_writes_the_comparison_under_the_reports_folder(tmp_path: Path) -> None:
    with open(tmp_path / "progress.txt", "w") as progress:
        [summary] = run_pipeline(
            [("flinktune_replay", {"trace": "ysb", "policies": "static,reactive", "hours": 0.25, "failures": "none"})],
            tmp_path,
            out=progress,
            timeout_s=180,
        )
    result = summary["returns"]["replay"]
    out_dir = Path(result["out_dir"])
    assert out_dir.parent == (tmp_path / "reports" / "replay").resolve()
    assert result["policies"] == ["static", "reactive"]
    table = Path(result["paths"]["markdown"]).read_text()
    assert "static" in table and "reactive" in table
    assert Path(result["paths"]["cost_plot"]).stat().st_size > 0
