"""The same pipeline with Airflow's metadata database and MLflow's backend store on PostgreSQL.

Needs a PostgreSQL on 127.0.0.1:5432 with trust authentication for user ``postgres`` (the CI
machines run one). Each run creates two throwaway databases and drops them after; the test is
skipped, saying why, only when no server answers.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from flinktune.airflow_local.runner import run_pipeline

pytestmark = [pytest.mark.airflow, pytest.mark.slow]

psycopg2 = pytest.importorskip("psycopg2", reason="psycopg2-binary is not installed")
SERVER = {"host": "127.0.0.1", "port": 5432, "user": "postgres", "connect_timeout": 3}


def _admin():
    con = psycopg2.connect(dbname="postgres", **SERVER)
    con.autocommit = True  # CREATE / DROP DATABASE cannot run in a transaction
    return con


@pytest.fixture()
def databases() -> Iterator[dict[str, str]]:
    try:
        con = _admin()
    except psycopg2.OperationalError as exc:
        pytest.skip(f"no PostgreSQL answers on 127.0.0.1:5432 as user postgres (trust auth): {str(exc).strip()}")
    names = {role: f"flinktune_test_{role}_{uuid.uuid4().hex[:10]}" for role in ("airflow", "mlflow")}
    try:
        with con.cursor() as cur:
            for name in names.values():
                cur.execute(f'CREATE DATABASE "{name}"')
        yield names
    finally:
        with con.cursor() as cur:
            for name in names.values():
                cur.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        con.close()


def _query(dbname: str, sql: str) -> list[tuple]:
    with psycopg2.connect(dbname=dbname, **SERVER) as con, con.cursor() as cur:
        cur.execute(sql)
        return cur.fetchall()


def test_profile_and_train_on_postgres_metadata_and_mlflow_store(tmp_path: Path, databases: dict[str, str]) -> None:
    url = "postgresql+psycopg2://postgres@127.0.0.1:5432/{}"
    conf = {
        "job": "demo",
        "configs": [{"parallelism": 12, "task_slots": 2, "cpu": 2.0, "memory_mb": 2048, "checkpoint_interval_s": 30}],
        "rates": [30000.0, 50000.0, 70000.0],
        "duration_s": 60,
        "max_runs": 1,
    }
    with open(tmp_path / "progress.txt", "w") as progress:
        [summary] = run_pipeline(
            [("flinktune_profile", conf)],
            tmp_path / "var",
            out=progress,
            timeout_s=300,
            database_url=url.format(databases["airflow"]),
            env={"FLINKTUNE_MLFLOW_TRACKING_URI": url.format(databases["mlflow"])},
        )
    assert summary["state"] == "success" and summary["returns"]["train_surrogate"]["version"] == "1"
    assert not (tmp_path / "var" / "airflow" / "airflow.db").exists(), "no SQLite fallback"
    assert not (tmp_path / "var" / "mlflow" / "mlflow.db").exists(), "no SQLite fallback"

    runs = _query(databases["airflow"], "SELECT dag_id, state FROM dag_run")
    assert runs == [("flinktune_profile", "success")]
    tis = _query(databases["airflow"], "SELECT task_id, map_index, state FROM task_instance ORDER BY task_id")
    assert tis == [("profile", 0, "success"), ("suggest", -1, "success"), ("train_surrogate", -1, "success")]
    aliases = _query(databases["mlflow"], "SELECT name, alias, version FROM registered_model_aliases")
    assert aliases == [("flinktune-surrogate-demo", "champion", 1)]
