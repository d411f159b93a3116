"""The state store on both of its databases: SQLite (embedded default) and PostgreSQL (production).

The PostgreSQL side uses the PostgreSQL at 127.0.0.1:5432 (user postgres): a throwaway database is
created for this module and dropped after it; without a reachable server those cases are skipped
with the reason. Also: one decider per job across processes, and state files that are refused.
"""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from flinktune.decision.store import SqliteStateStore, SqlStateStore, StateStoreError, open_state_store
from flinktune.settings import load_settings
from tests.pg_database import drop_store_tables, throwaway_database
from tests.stage_contracts import check_state_store

REPO = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="module")
def pg_url():
    """A fresh PostgreSQL database for this module, dropped afterwards (skip when no server answers)."""
    yield from throwaway_database("flinktune_store")


@pytest.fixture(params=["sqlite", "postgresql"])
def store_url(request, tmp_path) -> str:
    """The URL of an empty store on each database."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'state.db'}"
    url = request.getfixturevalue("pg_url")
    drop_store_tables(url)
    return url


def _open(url: str):
    return SqliteStateStore(url.removeprefix("sqlite:///")) if url.startswith("sqlite") else SqlStateStore(url)


def test_the_store_keeps_the_contract(store_url):
    check_state_store(_open(store_url))


def test_a_second_store_object_sees_what_the_first_wrote(store_url):
    check_state_store(_open(store_url))
    again = _open(store_url)
    assert again.policy_memory("c", "p") == {"n": 3} and again.job_mode("c")["set_by"] == "bob"
    assert again.jobs() == ["c", "other"] and again.decision_count() == 5


def test_settings_choose_postgresql_when_a_url_is_set(pg_url, tmp_path):
    drop_store_tables(pg_url)
    store = open_state_store(load_settings(var_dir=tmp_path, state_url=pg_url))
    assert store.dialect == "postgresql" and not (tmp_path / "state").exists()
    assert open_state_store(load_settings(var_dir=tmp_path)).dialect == "sqlite"


def test_a_read_only_open_never_creates_a_store(store_url, tmp_path):
    if store_url.startswith("sqlite"):
        with pytest.raises(StateStoreError, match="no such file"):
            SqliteStateStore(tmp_path / "none.db", create=False)
        assert not (tmp_path / "none.db").exists()
    else:
        with pytest.raises(StateStoreError, match="holds no flinktune tables"):
            SqlStateStore(store_url, create=False)
    _open(store_url)
    ro = (
        SqliteStateStore(store_url.removeprefix("sqlite:///"), create=False)
        if store_url.startswith("sqlite")
        else SqlStateStore(store_url, create=False)
    )
    assert ro.jobs() == []


DECIDER = textwrap.dedent(
    """
    import sys, time
    from flinktune.decision import Decision, JobState, Action
    from flinktune.config_space import Configuration
    from flinktune.decision.reconfig import ReconfigMode
    from flinktune.decision.stages import DecisionRecord, RealizeResult
    from flinktune.decision.store import SqliteStateStore, SqlStateStore

    url, start, me = sys.argv[1], float(sys.argv[2]), sys.argv[3]
    store = SqliteStateStore(url[len("sqlite:///"):]) if url.startswith("sqlite") else SqlStateStore(url)
    a = Configuration(12, 1, 1.0, 2048, 10)
    state = JobState("shared", 1.0, a, True, 1000.0, 1000.0, 0.0, 0.0, 100.0, 2.0, 2048.0, 0.5, 0.0, 600)
    time.sleep(max(0.0, start - time.time()))
    with store.decision_lock("shared") as held:
        if not held:
            print("held elsewhere", flush=True)
            sys.exit(0)
        time.sleep(2.0)  # deciding and applying take a while: the other decider arrives in the middle
        decision = Decision(Action.RECONFIGURE, me, "p", target=a.with_(parallelism=16))
        store.record_decision(DecisionRecord("shared", time.time(), state, decision, RealizeResult(True, ReconfigMode.IN_PLACE, 1.0)))
        print("acted", flush=True)
    """
)


def test_two_concurrent_deciders_for_one_job_act_once(store_url):
    _open(store_url)  # the schema exists before either decider starts
    start = time.time() + 6.0  # both processes have imported their libraries by then
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    procs = [subprocess.Popen([sys.executable, "-c", DECIDER, store_url, str(start), f"decider-{i}"], env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for i in range(2)]  # fmt: skip
    outs = [p.communicate(timeout=60) for p in procs]
    assert all(p.returncode == 0 for p in procs), [o[1][-500:] for o in outs]
    assert sorted(o[0].strip() for o in outs) == ["acted", "held elsewhere"], outs
    rows = _open(store_url).decisions("shared")
    assert len(rows) == 1 and list(rows["status"]) == ["applied"]
    with _open(store_url).decision_lock("shared") as held:  # released when the winner finished
        assert held


def _settings_for(path: Path, tmp_path: Path):
    return load_settings(var_dir=tmp_path, state_db=path)


@pytest.mark.parametrize(
    "make,says",
    [
        (lambda p: p.write_bytes(b""), "the file is empty (0 bytes)"),
        (lambda p: p.write_bytes(b"not a database at all, just text\n" * 10), "not a SQLite database"),
        (lambda p: p.mkdir(), "is a folder, not a SQLite file"),
        (
            lambda p: sqlite3.connect(p).execute("CREATE TABLE runs (id INTEGER)").connection.commit(),
            "another program's SQLite database",
        ),
    ],
    ids=["zero-bytes", "garbage", "folder", "other-program"],
)
def test_a_state_db_that_is_not_a_store_is_refused_in_one_line_and_left_alone(tmp_path, make, says):
    path = tmp_path / "state.db"
    make(path)
    before = path.read_bytes() if path.is_file() else None
    with pytest.raises(StateStoreError) as err:
        open_state_store(_settings_for(path, tmp_path))
    message = str(err.value)
    assert says in message and str(path) in message and "\n" not in message
    assert (path.read_bytes() if path.is_file() else None) == before, "never silently replaced"
    assert not Path(f"{path}.lock").exists()
