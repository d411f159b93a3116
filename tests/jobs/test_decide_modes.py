"""Advice before action: a new job's decisions are recorded, never applied, until it is switched to act.

The decide task on the twin, the way each entry point reaches it: the CLI (``--apply`` or not), the
fleet file's ``mode``, the state store's switch (``flinktune fleet act``), and a second decider for
the same job at the same time (it decides nothing).
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from typer.testing import CliRunner

from flinktune.cli.main import app
from flinktune.decision.store import open_state_store
from flinktune.twin.job_store import job_dir
from flinktune.twin.simulator import TwinJob
from jobs import decide, simulate
from tests.pg_database import drop_store_tables, throwaway_database


@pytest.fixture(scope="module")
def pg_url():
    yield from throwaway_database("flinktune_decide")


@pytest.fixture
def twin(settings, monkeypatch):
    simulate.run(job="demo", hours=0.6, settings=settings)
    monkeypatch.setenv("FLINKTUNE_CLUSTER", "twin")
    return settings


def _config(settings):
    return TwinJob.load(job_dir(settings.twin_dir, "demo") / "twin.json").config


def test_a_new_job_only_advises_even_with_apply_and_acts_once_switched(twin):
    before = _config(twin)
    out = decide.run(job="demo", ticks=2, policy="reactive", apply=True, settings=twin)
    assert out["mode"] == "advise" and out["dry_run"] is True and "every job starts in advice" in out["mode_why"]
    rows = open_state_store(twin).decisions("demo")
    assert len(rows) == 2 and set(rows["dry_run"]) == {1} and set(rows["changed"]) == {0}
    assert set(rows["action"]) == {"reconfigure"}, "the policy wanted a change: advice records it"
    assert _config(twin) == before, "advice changes nothing on the cluster"


def test_a_job_switched_to_act_applies_the_same_decision(twin):
    before = _config(twin)
    open_state_store(twin).set_mode("demo", "act", by="alice")
    acted = decide.run(job="demo", ticks=1, policy="reactive", apply=True, settings=twin)
    assert acted["mode"] == "act" and acted["dry_run"] is False and "by alice at" in acted["mode_why"]
    assert acted["decisions"][0]["action"] == "reconfigure" and acted["decisions"][0]["changed"], acted["decisions"]
    assert _config(twin) != before
    assert open_state_store(twin).decisions("demo")["dry_run"].iloc[-1] == 0


def test_without_apply_an_acting_job_only_records(twin):
    open_state_store(twin).set_mode("demo", "act", by="alice")
    out = decide.run(job="demo", ticks=1, policy="reactive", settings=twin)
    assert out["mode"] == "act" and out["dry_run"] is True
    assert all(isinstance(d["data_age_s"], float) and 0 <= d["data_age_s"] < 60 for d in out["decisions"]), out["decisions"]
    assert open_state_store(twin).decisions("demo")["dry_run"].tolist() == [1]


def test_the_fleet_file_mode_switches_a_job_and_an_advise_anywhere_wins(twin, tmp_path):
    fleet = tmp_path / "fleet.yaml"
    fleet.write_text("jobs:\n  - name: demo\n    mode: act\n")
    s = twin.model_copy(update={"fleet_file": fleet})
    out = decide.run(job="demo", ticks=1, policy="reactive", apply=True, settings=s)
    assert out["mode"] == "act" and out["dry_run"] is False and "fleet.yaml: jobs[0]" in out["mode_why"]
    open_state_store(s).set_mode("demo", "advise", by="bob")  # `flinktune fleet advise demo` beats the file
    out = decide.run(job="demo", ticks=1, policy="reactive", apply=True, settings=s)
    assert out["mode"] == "advise" and out["dry_run"] is True and "by bob" in out["mode_why"]


def _decide_in_another_process(settings, **env) -> subprocess.CompletedProcess:
    code = (
        "import json; from flinktune.settings import load_settings; from jobs import decide; "
        f"print(json.dumps(decide.run(job='demo', policy='reactive', apply=True, settings=load_settings(var_dir={str(settings.var_dir)!r}))))"
    )
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=180,
                          env={**os.environ, "FLINKTUNE_CLUSTER": "twin", **env})  # fmt: skip


def test_a_second_decider_for_the_same_job_decides_nothing(twin):
    with open_state_store(twin).decision_lock("demo") as held:
        assert held  # a POSIX record lock is per process: the second decider is another process
        proc = _decide_in_another_process(twin)
    assert proc.returncode == 0, proc.stderr[-800:]
    assert "holds job 'demo''s decider lock" in proc.stdout
    assert open_state_store(twin).decisions("demo").empty


def test_on_postgresql_a_decider_waits_for_none_and_acts_once_the_lock_is_free(twin, pg_url):
    from flinktune.decision.store import SqlStateStore

    drop_store_tables(pg_url)
    store = SqlStateStore(pg_url)
    store.set_mode("demo", "act", by="alice")
    with store.decision_lock("demo") as held:
        assert held
        blocked = _decide_in_another_process(twin, FLINKTUNE_STATE_URL=pg_url)
    assert blocked.returncode == 0 and "decider lock" in blocked.stdout, blocked.stderr[-800:]
    assert store.decisions("demo").empty
    acted = _decide_in_another_process(twin, FLINKTUNE_STATE_URL=pg_url)
    assert acted.returncode == 0, acted.stderr[-800:]
    rows = store.decisions("demo")
    assert len(rows) == 1 and int(rows["dry_run"].iloc[0]) == 0 and rows["status"].iloc[0] == "applied"
    assert not (twin.var_dir / "state" / "flinktune.db").exists(), "the PostgreSQL store, not the SQLite file"


def test_the_cli_decides_dry_by_default_and_switches_modes_with_who(twin):
    runner = CliRunner()
    var = str(twin.var_dir)
    res = runner.invoke(app, ["decide", "--job", "demo", "--var-dir", var, "--policy", "static"])
    assert res.exit_code == 0, res.output
    assert '"dry_run": true' in res.output and '"mode": "advise"' in res.output
    res = runner.invoke(app, ["fleet", "act", "demo", "--by", "alice", "--var-dir", var])
    assert res.exit_code == 0 and res.output.startswith("demo: act (`flinktune fleet act` by alice at"), res.output
    res = runner.invoke(app, ["decide", "--job", "demo", "--var-dir", var, "--policy", "static", "--apply"])
    assert res.exit_code == 0 and '"dry_run": false' in res.output, res.output
    res = runner.invoke(app, ["fleet", "advise", "demo", "--by", "bob", "--var-dir", var])
    assert res.exit_code == 0 and res.output.startswith("demo: advise (`flinktune fleet advise` by bob at"), res.output
    assert open_state_store(twin).job_mode("demo")["set_by"] == "bob"
    res = runner.invoke(app, ["decide", "--job", "demo", "--var-dir", var, "--apply", "--dry-run"])
    assert res.exit_code == 2 and "not both" in res.output


def test_a_switch_on_an_empty_state_file_is_refused_in_one_line_and_leaves_it(tmp_path):
    db = tmp_path / "var" / "state" / "flinktune.db"
    db.parent.mkdir(parents=True)
    db.write_bytes(b"")
    res = CliRunner().invoke(app, ["fleet", "act", "demo", "--by", "alice", "--var-dir", str(tmp_path / "var")])
    assert res.exit_code == 2 and len(res.output.strip().splitlines()) == 1, res.output
    assert "the file is empty (0 bytes)" in res.output and db.read_bytes() == b""
