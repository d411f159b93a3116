"""``flinktune report`` on a state folder: progress as it goes, a warning for a target below the latency at rest,
and at the end the verdict and both paths."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
from typer.testing import CliRunner

from flinktune.cli.main import app
from flinktune.lake import Lake
from tests.report_state import state_folder


def test_report_shows_progress_and_ends_with_the_verdict_and_both_paths(tmp_path: Path) -> None:
    var = state_folder(tmp_path / "var")
    res = CliRunner().invoke(app, ["report", "--job", "j", "--var-dir", str(var)], env={"FLINKTUNE_LATENCY_TARGET_MS": "2000"})
    assert res.exit_code == 0, res.output
    lines = res.output.strip().splitlines()
    steps = [ln for ln in lines if ln.startswith("[")]
    assert [s.split("] ", 1)[1].split(" ")[0] for s in steps] == ["reading", "replaying", "checking", "writing", "logging"]
    assert lines[-3].startswith("report: ") and lines[-3].endswith("report.md") and Path(lines[-3][8:]).is_file()
    assert lines[-2].startswith("html report: ") and Path(lines[-2][13:]).is_file()
    assert lines[-1].startswith("verdict: flinktune") and "on the 2,000 ms p95 target" in lines[-1]
    assert "warning" not in res.output


def test_a_target_below_the_latency_at_rest_is_warned_about_in_one_line(tmp_path: Path) -> None:
    var = state_folder(tmp_path / "var")
    features = Lake(var / "lake").read_dataset("features_1m", "j")[0]
    best = float(pd.to_numeric(features["latency_p95_ms"]).min())
    res = CliRunner().invoke(app, ["report", "--job", "j", "--var-dir", str(var)], env={"FLINKTUNE_LATENCY_TARGET_MS": "50"})
    assert res.exit_code == 0, res.output
    warnings = [ln for ln in res.output.splitlines() if ln.startswith("warning:")]
    assert warnings == [f"warning: the latency target 50 ms is below the job's p95 at rest, {best:,.0f} ms (its best minute in the "
                        "lake): no configuration can meet it; choose a target above it"]  # fmt: skip


def test_a_demo_folder_is_judged_on_the_target_the_demo_ran_with(tmp_path: Path, monkeypatch) -> None:
    var = state_folder(tmp_path / "var")
    (var / "demo-settings.json").write_text('{"latency_target_ms": 2500}')
    monkeypatch.delenv("FLINKTUNE_LATENCY_TARGET_MS", raising=False)
    res = CliRunner().invoke(app, ["report", "--job", "j", "--var-dir", str(var)])
    assert res.exit_code == 0 and "on the 2,500 ms p95 target" in res.output.strip().splitlines()[-1], res.output
    res = CliRunner().invoke(app, ["report", "--job", "j", "--var-dir", str(var)], env={"FLINKTUNE_LATENCY_TARGET_MS": "3000"})
    assert res.exit_code == 0 and "on the 3,000 ms p95 target" in res.output.strip().splitlines()[-1], "the environment wins"
    (var / "demo-settings.json").write_text("{}")
    res = CliRunner().invoke(app, ["report", "--job", "j", "--var-dir", str(var)])
    assert res.exit_code == 2 and "demo-settings.json: not a demo settings file" in res.output
