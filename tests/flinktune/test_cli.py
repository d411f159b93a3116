"""The CLI's input checks: bad input ends with a clear error before any work starts."""

from pathlib import Path

from typer.testing import CliRunner

from flinktune.cli import app

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
