"""The CLI's input checks: bad input ends with a clear error before any work starts."""

from pathlib import Path

from typer.testing import CliRunner

from flinktune.cli.main import app

runner = CliRunner()


def test_unknown_option_is_refused():
    res = runner.invoke(app, ["demo", "--no-such-option"])
    assert res.exit_code != 0
    assert "No such option" in res.output


def test_bad_choice_is_refused():
    res = runner.invoke(app, ["demo", "--policy", "magic"])
    assert res.exit_code != 0 and "magic" in res.output


def test_malformed_trace_file_names_file_and_line(tmp_path):
    bad = tmp_path / "trace.csv"
    bad.write_text("timestamp,value\n0,100\n1,abc\n2,120\n")
    res = runner.invoke(app, ["demo", "--trace-file", str(bad), "--var-dir", str(tmp_path / "v")])
    assert res.exit_code == 2
    assert "trace.csv:3" in res.output and "abc" in res.output
    assert not (tmp_path / "v").exists()  # nothing started


def test_too_short_trace_is_refused(tmp_path):
    short = tmp_path / "short.csv"
    short.write_text("\n".join(f"{i},{1000 + i}" for i in range(0, 3600, 10)) + "\n")
    res = runner.invoke(app, ["demo", "--trace-file", str(short), "--var-dir", str(tmp_path / "v")])
    assert res.exit_code == 2 and "needs" in res.output


def test_bad_job_name(tmp_path):
    res = runner.invoke(app, ["demo", "--job", "Bad Name", "--var-dir", str(tmp_path / "v")])
    assert res.exit_code == 2 and "not a valid job name" in res.output


def test_demo_refuses_to_wipe_a_foreign_folder(tmp_path):
    foreign = tmp_path / "mine"
    foreign.mkdir()
    (foreign / "precious.txt").write_text("keep me")
    res = runner.invoke(app, ["demo", "--var-dir", str(foreign)])
    assert res.exit_code == 2 and "not created by the demo" in res.output
    assert Path(foreign / "precious.txt").read_text() == "keep me"


def _demo_folder(root: Path) -> Path:
    """What `make demo` leaves behind, as far as finding it goes: var/demo with its marker and a state folder."""
    demo = root / "var" / "demo"
    (demo / "state").mkdir(parents=True)
    (demo / ".flinktune-demo").write_text("created by `flinktune demo`\n")
    return demo


def _tree(folder: Path) -> set[str]:
    return {str(p.relative_to(folder)) for p in folder.rglob("*")}


def test_step_commands_find_the_demo_folder_and_leave_nothing_when_they_refuse(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("FLINKTUNE_VAR_DIR", raising=False)
    demo = _demo_folder(tmp_path)
    before = _tree(tmp_path)
    res = runner.invoke(app, ["report", "--job", "demo"])
    assert res.exit_code == 2 and "var/demo/lake" in res.output, res.output  # looked in the demo's folder
    res = runner.invoke(app, ["decide", "--job", "demo", "--dry-run"])
    assert res.exit_code == 2 and "var/demo/twin" in res.output, res.output
    assert _tree(tmp_path) == before, "a refused command must write nothing (no empty databases, no folders)"
    # The same with the folder named explicitly.
    res = runner.invoke(app, ["report", "--job", "demo", "--var-dir", str(demo)])
    assert res.exit_code == 2 and "no curated features" in res.output
    assert _tree(tmp_path) == before


def test_step_commands_refuse_a_folder_without_state_and_create_nothing(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("FLINKTUNE_VAR_DIR", raising=False)
    res = runner.invoke(app, ["decide", "--job", "demo"])
    assert res.exit_code == 2 and "default var: no such folder" in res.output, res.output
    empty = tmp_path / "empty"
    empty.mkdir()
    res = runner.invoke(app, ["report", "--job", "demo", "--var-dir", str(empty)])
    assert res.exit_code == 2 and "holds no flinktune state" in res.output
    assert _tree(tmp_path) == {"empty"}


def test_replay_writes_under_var_by_default_not_into_tracked_docs(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    args = ["replay", "--policies", "static", "--hours", "0.5", "--failures", "none", "--workers", "1"]
    res = runner.invoke(app, args)
    assert res.exit_code == 0, res.output
    assert list((tmp_path / "var" / "replay").glob("*.md")) and not (tmp_path / "docs").exists()


def test_replay_policy_option_reaches_the_policy_and_the_written_command(tmp_path, monkeypatch):
    import json

    monkeypatch.chdir(tmp_path)
    args = ["replay", "--policies", "static,reactive", "--hours", "0.5", "--failures", "none", "--workers", "1"]
    res = runner.invoke(app, [*args, "--policy-option", "reactive.target_utilization=0.35"])
    assert res.exit_code == 0, res.output
    (meta_file,) = (tmp_path / "var" / "replay").glob("*.json")
    meta = json.loads(meta_file.read_text())["meta"]
    assert meta["policy_options"] == {"reactive": {"target_utilization": 0.35}}
    assert meta["command"].endswith("--policy-option reactive.target_utilization=0.35")


def test_demo_jobs_out_of_range_or_with_a_trace_file_is_refused_before_any_work(tmp_path):
    res = runner.invoke(app, ["demo", "--jobs", "7", "--var-dir", str(tmp_path / "v")])
    assert res.exit_code == 2 and "--jobs 7: the demo runs 1 to 6 jobs" in res.output
    trace = tmp_path / "trace.csv"
    trace.write_text("\n".join(f"{i},{1000 + i}" for i in range(0, 40_000, 10)) + "\n")
    res = runner.invoke(app, ["demo", "--jobs", "2", "--trace-file", str(trace), "--var-dir", str(tmp_path / "v")])
    assert res.exit_code == 2 and "--trace-file runs one job" in res.output
    assert not (tmp_path / "v").exists()  # nothing started
