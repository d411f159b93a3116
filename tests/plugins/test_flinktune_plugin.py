"""The flinktune AirflowPlugin: Airflow discovers it in plugins/ and its FastAPI view serves decisions.

Airflow runs in a child process (it configures logging and reads its config on import); the
state database is written here with the real store.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from flinktune.config_space import Configuration, default_space
from flinktune.decision import Action, Decision
from flinktune.evaluation import evaluate
from flinktune.orchestration.airflow_home import airflow_env
from flinktune.stages import RealizeResult
from flinktune.store import SqliteStateStore
from flinktune.testing import raw_samples

pytestmark = pytest.mark.airflow

# In the child: find the plugin through Airflow's plugin manager and call its app.
CLIENT = r"""
import json, sys
from airflow import plugins_manager
from fastapi.testclient import TestClient
apps, _ = plugins_manager.get_fastapi_plugins()
mounted = {entry["url_prefix"]: entry["app"] for entry in apps}
client = TestClient(mounted["/flinktune"])
out = {"import_errors": plugins_manager.get_import_errors(), "prefixes": sorted(mounted), "responses": []}
for path in json.loads(sys.argv[1]):
    response = client.get(path)
    out["responses"].append([response.status_code, response.json()])
print("PLUGIN:" + json.dumps(out))
"""


def _call(env_extra: dict[str, str], var_dir: Path, paths: list[str]) -> dict:
    env = {**os.environ, **airflow_env(var_dir), **env_extra}
    proc = subprocess.run([sys.executable, "-c", CLIENT, json.dumps(paths)], env=env, capture_output=True,
                          text=True, timeout=120)
    lines = [line for line in proc.stdout.splitlines() if line.startswith("PLUGIN:")]
    assert proc.returncode == 0 and lines, f"plugin client failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    return json.loads(lines[-1].removeprefix("PLUGIN:"))


def test_plugin_is_discovered_and_serves_the_newest_decisions(tmp_path: Path) -> None:
    db = tmp_path / "state.db"
    store = SqliteStateStore(db)
    space = default_space()
    state = evaluate("wordcount", raw_samples("wordcount", 0, 600, rate=30000), space.maximum, 600, window_s=600)
    smaller = Configuration(12, 2, 2.0, 2048, 10)
    store.record_decision("wordcount", 1000.0, state, Decision.keep("flinktune", "steady"), None)
    store.record_decision("wordcount", 1600.0, state, Decision(Action.RECONFIGURE, "cheaper", "flinktune", target=smaller),
                          RealizeResult(True, "redeploy", 40.0))
    store.record_decision("wordcount", 2200.0, state, Decision.keep("flinktune", "settled"), None)

    result = _call({"FLINKTUNE_STATE_DB": str(db)}, tmp_path / "var", [
        "/jobs", "/decisions?job=wordcount&limit=2", "/decisions?job=Bad%20Name!", "/decisions?job=wordcount&limit=0",
    ])
    assert result["import_errors"] == {} and "/flinktune" in result["prefixes"]
    (jobs_code, jobs), (code, body), (bad_code, bad), (limit_code, _) = result["responses"]
    assert (jobs_code, jobs) == (200, {"jobs": ["wordcount"]})
    assert code == 200 and body["state_db"] == str(db)
    assert [(d["ts"], d["action"], d["reason"]) for d in body["decisions"]] == [
        (1600.0, "reconfigure", "cheaper"), (2200.0, "keep", "settled")]
    assert body["decisions"][0]["target"]["parallelism"] == 12, "JSON columns come back as objects"
    assert bad_code == 422 and bad["detail"][0]["loc"] == ["query", "job"]
    assert limit_code == 422


def test_missing_state_database_is_a_404_naming_it_and_is_not_created(tmp_path: Path) -> None:
    db = tmp_path / "nowhere" / "state.db"
    result = _call({"FLINKTUNE_STATE_DB": str(db)}, tmp_path / "var", ["/jobs"])
    assert result["responses"] == [[404, {"detail": f"no flinktune state database at {db}"}]]
    assert not db.parent.exists()
