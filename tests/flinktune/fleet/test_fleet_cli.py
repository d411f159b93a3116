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


def test_fleet_init_writes_a_commented_file_that_validates(tmp_path):
    path = tmp_path / "fleet.yaml"
    out = runner.invoke(app, ["fleet", "init", str(path)])
    assert out.exit_code == 0 and path.is_file(), out.output
    assert "# Settings (default in brackets):" in path.read_text()
    checked = runner.invoke(app, ["fleet", "validate", str(path)])
    assert checked.exit_code == 0 and checked.output.strip() == f"{path}: 2 jobs, all valid (checkout, clickstream)"
    before = path.read_text()
    again = runner.invoke(app, ["fleet", "init", str(path)])
    assert again.exit_code == 2 and "exists; pass --force" in again.output and path.read_text() == before
    assert runner.invoke(app, ["fleet", "init", str(path), "--force"]).exit_code == 0
    assert runner.invoke(app, ["fleet", "init", str(tmp_path)]).exit_code == 2, "a folder is not a file path"


def test_fleet_validate_names_each_held_job_and_what_is_wrong(tmp_path):
    path = tmp_path / "fleet.yaml"
    path.write_text("jobs:\n  - {name: ads, max_paralelism: 8}\n  - {name: clicks}\n  - {name: Bad_Name}\n")
    out = runner.invoke(app, ["fleet", "validate", str(path)])
    assert out.exit_code == 2
    held = [line for line in out.output.splitlines() if line.startswith("held ")]
    assert (
        len(held) == 2
        and "held ads: fleet.yaml: jobs[0]: max_paralelism: unknown setting (did you mean 'max_parallelism'?)" in held
    )
    assert any(line.startswith("held Bad_Name: fleet.yaml: jobs[2]: name:") for line in held)
    assert out.output.strip().splitlines()[-1] == f"error: {path}: 2 of 3 jobs held; fix the settings named above"
    path.write_text("jobs: []\n")
    empty = runner.invoke(app, ["fleet", "validate", str(path)])
    assert empty.exit_code == 2 and "'jobs' is empty" in empty.output
    path.write_text("job:\n  - {name: ads}\n")
    shape = runner.invoke(app, ["fleet", "validate", str(path)])
    assert shape.exit_code == 2 and "expected a mapping with a 'jobs' list" in shape.output
