"""`flinktune fleet list` as a user runs it."""

import json

from typer.testing import CliRunner

from flinktune.cli.main import app

runner = CliRunner()


def test_fleet_list_shows_managed_and_held_jobs(tmp_path):
    path = tmp_path / "fleet.yaml"
    path.write_text("jobs:\n  - {name: ads, latency_target_ms: 800}\n  - {name: clicks, policy: nope}\n")
    out = runner.invoke(app, ["fleet", "list", "--file", str(path)])
    assert out.exit_code == 0, out.output
    lines = out.output.splitlines()
    assert lines[1].split()[:3] == ["ads", "managed", "flinktune"] and "800 ms" in lines[1]
    assert lines[2].split()[:2] == ["clicks", "held"] and "unknown policy 'nope'" in lines[2]
    assert lines[-1] == "1 managed, 1 held"
    rows = [json.loads(line) for line in runner.invoke(app, ["fleet", "list", "--file", str(path), "--json"]).output.splitlines()]
    assert [(r["job"], r["state"]) for r in rows] == [("ads", "managed"), ("clicks", "held")]


def test_fleet_list_refuses_in_one_line(tmp_path):
    out = runner.invoke(app, ["fleet", "list", "--file", str(tmp_path / "missing.yaml")])
    assert out.exit_code == 2 and "fleet file not found" in out.output and "Traceback" not in out.output
    both = runner.invoke(app, ["fleet", "list"])
    assert both.exit_code == 2 and "exactly one of --file" in both.output
