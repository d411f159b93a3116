"""A copied state folder's MLflow store logs into the copy and reads its own artifacts; the original is untouched."""

from __future__ import annotations

import hashlib
import shutil
import sqlite3
from pathlib import Path

import mlflow
import pytest
from mlflow import MlflowClient

from models import registry
from models.store_home import HOME_FILE, follow_home, store_home


def _uri(home: Path) -> str:
    return f"sqlite:///{home / 'mlflow' / 'mlflow.db'}"


def _snapshot(folder: Path) -> dict[str, str]:
    return {
        str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.rglob("*")) if p.is_file()
    }


def _log_run(home: Path, text: str) -> str:
    registry.configure(_uri(home), home / "mlflow" / "artifacts")
    with mlflow.start_run(experiment_id=registry.ensure_experiment("flinktune-report-demo")) as run:
        note = home / f"{text}.txt"
        note.write_text(text)
        mlflow.log_artifact(str(note), artifact_path="report")
    return run.info.run_id


def test_a_copied_folder_logs_into_itself_and_reads_its_own_artifacts(tmp_path: Path) -> None:
    original, copy = tmp_path / "a" / "var", tmp_path / "b" / "var"
    first = _log_run(original, "first")
    client = MlflowClient(_uri(original), _uri(original))
    client.create_registered_model("flinktune-surrogate-demo")
    client.create_model_version(
        "flinktune-surrogate-demo", source=f"{(original / 'mlflow' / 'artifacts').as_uri()}/m", run_id=first
    )
    shutil.copytree(original, copy)
    before = _snapshot(original)

    second = _log_run(copy, "second")  # configure() moves the copy's stored paths onto the copy
    assert _snapshot(original) == before, "nothing written into the folder the copy came from"
    c = MlflowClient(_uri(copy), _uri(copy))
    for run_id in (first, second):
        uri = c.get_run(run_id).info.artifact_uri
        assert uri.startswith(copy.resolve().as_uri()), uri
    local = mlflow.artifacts.download_artifacts(run_id=first, artifact_path="report/first.txt", tracking_uri=_uri(copy))
    assert Path(local).read_text() == "first"
    assert c.get_model_version("flinktune-surrogate-demo", "1").source.startswith(copy.resolve().as_uri())
    assert (copy / "report" / "second.txt").exists() is False and list((copy / "mlflow" / "artifacts").rglob("second.txt"))
    assert not list((original / "mlflow" / "artifacts").rglob("second.txt"))


def test_only_paths_under_the_old_folder_move(tmp_path: Path) -> None:
    old = tmp_path / "var"
    db = old / "mlflow" / "mlflow.db"
    db.parent.mkdir(parents=True)
    with sqlite3.connect(db) as con:
        con.execute("CREATE TABLE experiments (artifact_location VARCHAR(256), n INTEGER)")
        con.executemany(
            "INSERT INTO experiments VALUES (?, 1)",
            [(f"file://{old}/mlflow/artifacts/x",), (f"file://{old}2/mlflow/artifacts/y",)],
        )
    assert follow_home(_uri(old)) == 0 and (db.parent / HOME_FILE).is_file(), "in place: only the marker"
    new = tmp_path / "moved"
    shutil.move(old, new)
    assert follow_home(_uri(new)) == 1
    with sqlite3.connect(new / "mlflow" / "mlflow.db") as con:
        rows = sorted(r for (r,) in con.execute("SELECT artifact_location FROM experiments"))
    assert rows == sorted([f"file://{new}/mlflow/artifacts/x", f"file://{old}2/mlflow/artifacts/y"])
    assert follow_home(_uri(new)) == 0, "once moved, nothing more to do"


@pytest.mark.parametrize("uri", ["postgresql://mlflow@db/mlflow", "sqlite:////tmp/elsewhere/mlflow.db", "http://127.0.0.1:5000"])
def test_stores_outside_a_state_folder_are_left_alone(uri: str) -> None:
    assert store_home(uri) is None and follow_home(uri) == 0
