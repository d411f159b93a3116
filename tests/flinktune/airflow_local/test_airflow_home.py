"""prepare_airflow_home: the env it builds, the one-time `airflow db migrate`, and its failures."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from flinktune.airflow_local.airflow_home import (
    DB_CACHE_VARIABLE,
    DEFAULT_DAGS_FOLDER,
    DEFAULT_PLUGINS_FOLDER,
    AirflowHomeError,
    airflow_env,
    prepare_airflow_home,
)

MARKER = ".flinktune-migrated.json"


def test_env_points_airflow_at_this_repo_and_a_home_under_var(tmp_path: Path) -> None:
    env = airflow_env(tmp_path / "var")
    home = (tmp_path / "var" / "airflow").resolve()
    assert env["AIRFLOW_HOME"] == str(home)
    assert env["AIRFLOW__CORE__DAGS_FOLDER"] == str(DEFAULT_DAGS_FOLDER) and DEFAULT_DAGS_FOLDER.name == "dags"
    assert env["AIRFLOW__CORE__PLUGINS_FOLDER"] == str(DEFAULT_PLUGINS_FOLDER)
    assert env["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"] == f"sqlite:///{home / 'airflow.db'}"
    assert env["AIRFLOW__CORE__LOAD_EXAMPLES"] == "False" and env["AIRFLOW__CORE__UNIT_TEST_MODE"] == "False"
    assert int(env["AIRFLOW__CORE__PARALLELISM"]) <= 4
    assert not (tmp_path / "var").exists(), "airflow_env must not touch the disk"


def test_missing_dags_folder_is_named(tmp_path: Path) -> None:
    with pytest.raises(AirflowHomeError, match=r"AIRFLOW__CORE__DAGS_FOLDER points at .*nowhere, which is not a directory"):
        prepare_airflow_home(tmp_path / "var", dags_folder=tmp_path / "nowhere")


def test_home_that_is_a_file_is_a_clear_error(tmp_path: Path) -> None:
    (tmp_path / "var").mkdir()
    (tmp_path / "var" / "airflow").write_text("not a folder")
    with pytest.raises(AirflowHomeError, match=r"cannot create AIRFLOW_HOME .*var/airflow"):
        prepare_airflow_home(tmp_path / "var")


@pytest.mark.airflow
def test_migrates_once_then_skips_and_upgrades_a_copy_when_airflow_changes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(DB_CACHE_VARIABLE, raising=False)
    env = prepare_airflow_home(tmp_path / "var")
    home = Path(env["AIRFLOW_HOME"])
    db, marker = home / "airflow.db", home / MARKER
    with sqlite3.connect(db) as con:
        tables = {row[0] for row in con.execute("select name from sqlite_master where type='table'")}
    assert {"dag", "dag_run", "task_instance", "alembic_version"} <= tables
    recorded = json.loads(marker.read_text())
    assert recorded["database"] == str(db) and recorded["airflow_version"].startswith("3.")
    assert (home / "logs" / "db-migrate.log").is_file()

    stamp = (db.stat().st_mtime_ns, marker.stat().st_mtime_ns)
    assert prepare_airflow_home(tmp_path / "var") == env
    assert (db.stat().st_mtime_ns, marker.stat().st_mtime_ns) == stamp, "an up-to-date home must not migrate again"

    # A marker from another Airflow version: migrate again (on a copy), keeping the data.
    with sqlite3.connect(db) as con:
        con.execute("create table kept (x int)")
    marker.write_text(json.dumps({"airflow_version": "2.10.0", "database": str(db)}))
    prepare_airflow_home(tmp_path / "var")
    assert json.loads(marker.read_text())["airflow_version"] == recorded["airflow_version"]
    with sqlite3.connect(db) as con:
        assert con.execute("select count(*) from sqlite_master where name='kept'").fetchone() == (1,)
    assert not (home / "airflow.db.partial").exists()


@pytest.mark.airflow
def test_failed_migration_names_the_database_and_leaves_it_untouched(tmp_path: Path) -> None:
    home = tmp_path / "var" / "airflow"
    home.mkdir(parents=True)
    (home / "airflow.db").write_bytes(b"this is not sqlite" * 100)
    (home / MARKER).write_text(json.dumps({"airflow_version": "2.10.0"}))
    with pytest.raises(AirflowHomeError) as caught:
        prepare_airflow_home(tmp_path / "var")
    message = str(caught.value)
    assert "`airflow db migrate` failed with exit code" in message and str(home / "airflow.db") in message
    assert "not a database" in message, "the tail of Airflow's own error should be in the message"
    assert (home / "airflow.db").read_bytes() == b"this is not sqlite" * 100
    assert json.loads((home / MARKER).read_text()) == {"airflow_version": "2.10.0"}
    assert not (home / "airflow.db.partial").exists()


@pytest.mark.airflow
def test_a_new_home_starts_from_the_cache_that_the_first_migration_filled(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    first = Path(prepare_airflow_home(tmp_path / "a", db_cache=cache)["AIRFLOW_HOME"])
    assert (first / "logs" / "db-migrate.log").is_file()
    (template,) = cache.glob("airflow-*.db")
    assert template.read_bytes() == (first / "airflow.db").read_bytes()

    second = Path(prepare_airflow_home(tmp_path / "b", db_cache=cache)["AIRFLOW_HOME"])
    assert not (second / "logs" / "db-migrate.log").exists(), "a cached database needs no migration"
    assert (second / "airflow.db").read_bytes() == template.read_bytes()
    assert json.loads((second / MARKER).read_text())["database"] == str(second / "airflow.db")
    with sqlite3.connect(second / "airflow.db") as con:
        con.execute("create table mine (x int)")  # the new home's database is its own, not the cache's
    with sqlite3.connect(template) as con:
        assert con.execute("select count(*) from sqlite_master where name='mine'").fetchone() == (0,)
    assert not list(cache.glob("*.partial")) and not list(second.glob("*.partial"))
