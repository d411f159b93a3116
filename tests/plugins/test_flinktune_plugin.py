"""The flinktune AirflowPlugin: Airflow discovers it in plugins/ and its FastAPI view serves decisions.

Airflow runs in a child process (it configures logging and reads its config on import); the
state database is written here with the real store.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from flinktune.airflow_local.airflow_home import airflow_env
from flinktune.config_space import Configuration, default_space
from flinktune.decision import Action, Decision
from flinktune.decision.evaluation import evaluate
from flinktune.decision.stages import DecisionRecord, RealizeResult
from flinktune.decision.store import SqliteStateStore
from flinktune.decision.testing import raw_samples

pytestmark = pytest.mark.airflow

# In the child: Airflow's API server app (its auth manager, the plugins mounted by Airflow) and a
# viewer's token from Airflow's own login endpoint. "full" builds the whole API server app
# (create_app); "light" only what create_app does for auth and plugins (init_auth_manager,
# init_plugins: the same functions), which is half the start-up time for the content tests.
CLIENT = r"""
import json, os, sys
from airflow import plugins_manager
from fastapi import FastAPI
from fastapi.testclient import TestClient
spec = json.loads(sys.argv[1])
if spec["app"] == "full":
    from airflow.api_fastapi.app import create_app
    app = create_app("core")
else:
    from airflow.api_fastapi.app import init_auth_manager, init_plugins
    app = FastAPI()
    init_auth_manager(app)
    init_plugins(app)
client = TestClient(app)
password = json.load(open(os.environ["AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE"]))["viewer"]
login = client.post("/auth/token", json={"username": "viewer", "password": password})
token = login.json()["access_token"]
head, payload, signature = token.split(".")
headers = {"none": {}, "viewer": {"Authorization": "Bearer " + token},
           "forged": {"Authorization": "Bearer " + head + "." + payload + "." + signature[::-1]}}
out = {"import_errors": plugins_manager.get_import_errors(), "login": login.status_code, "responses": []}
for auth, path in spec["requests"]:
    response = client.get("/flinktune" + path, headers=headers[auth])
    is_json = response.headers.get("content-type", "").startswith("application/json")
    out["responses"].append([response.status_code, response.json() if is_json else response.text])
print("PLUGIN:" + json.dumps(out))
"""


def _call(env_extra: dict[str, str], var_dir: Path, paths: list, *, auth: str = "viewer", app: str = "light") -> dict:
    """GET each of ``paths`` under /flinktune as ``auth`` ("viewer", "none", "forged"; or one per
    path as ``[auth, path]`` pairs) through Airflow's app in a child process. ``var_dir`` holds a
    migrated Airflow home (the ``airflow_var`` fixture: tokens are checked against its database)."""
    requests = [p if isinstance(p, list) else [auth, p] for p in paths]
    env = {
        **os.environ,
        **airflow_env(var_dir),
        "AIRFLOW__CORE__AUTH_MANAGER": "airflow.api_fastapi.auth.managers.simple.simple_auth_manager.SimpleAuthManager",
        "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS": "viewer:viewer",
        "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE": str(var_dir / f"passwords-{uuid.uuid4().hex}.json"),
        "AIRFLOW__API_AUTH__JWT_SECRET": "flinktune-test-secret-" + "x" * 48,
        **env_extra,
    }
    proc = subprocess.run(
        [sys.executable, "-c", CLIENT, json.dumps({"app": app, "requests": requests})],
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
    )
    lines = [line for line in proc.stdout.splitlines() if line.startswith("PLUGIN:")]
    assert proc.returncode == 0 and lines, f"plugin client failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    result = json.loads(lines[-1].removeprefix("PLUGIN:"))
    assert result["login"] == 201, "Airflow's login endpoint gives the viewer a token"
    return result


def test_every_route_answers_only_callers_airflow_authenticates(tmp_path: Path, airflow_var: Path) -> None:
    """The real API server app (create_app): no token is 401, a forged token 403, a viewer's token
    200, on every route."""
    db = tmp_path / "state.db"
    _record_three_decisions(db, "wordcount")
    routes = [
        "/",
        "/jobs",
        "/decisions?job=wordcount",
        "/job/wordcount",
        "/job/wordcount/report",
        "/job/wordcount/plots/a.png",
        "/data-docs/index.html",
    ]
    env = {
        "FLINKTUNE_STATE_DB": str(db),
        "FLINKTUNE_REPORTS_DIR": str(tmp_path / "reports"),
        "FLINKTUNE_MLFLOW_TRACKING_URI": f"sqlite:///{tmp_path / 'none' / 'mlflow.db'}",
    }
    requests = [[auth, r] for auth in ("none", "forged") for r in routes] + [["viewer", "/jobs"], ["viewer", "/job/wordcount"]]
    result = _call(env, airflow_var, requests, app="full")
    assert result["import_errors"] == {}
    codes = [code for code, _ in result["responses"]]
    assert codes[: len(routes)] == [401] * len(routes), "no credential: 401, as on /api/v2"
    assert codes[len(routes) : 2 * len(routes)] == [403] * len(routes), "a token Airflow did not sign: 403"
    assert codes[-2:] == [200, 200] and result["responses"][-2][1] == {"jobs": ["wordcount"]}
    assert "wordcount" not in json.dumps(result["responses"][: 2 * len(routes)]), "a refusal shows no data"
    assert str(tmp_path) not in json.dumps(result["responses"]), "no server path in any answer"


def test_plugin_is_discovered_and_serves_the_newest_decisions(tmp_path: Path, airflow_var: Path) -> None:
    db = tmp_path / "state.db"
    store = SqliteStateStore(db)
    space = default_space()
    state = evaluate("wordcount", raw_samples("wordcount", 0, 600, rate=30000), space.maximum, 600, window_s=600)
    smaller = Configuration(12, 2, 2.0, 2048, 10)
    store.record_decision(DecisionRecord("wordcount", 1000.0, state, Decision.keep("flinktune", "steady"), None))
    store.record_decision(
        DecisionRecord(
            "wordcount",
            1600.0,
            state,
            Decision(Action.RECONFIGURE, "cheaper", "flinktune", target=smaller),
            RealizeResult(True, "redeploy", 40.0),
        )
    )
    store.record_decision(DecisionRecord("wordcount", 2200.0, state, Decision.keep("flinktune", "settled"), None))

    result = _call(
        {"FLINKTUNE_STATE_DB": str(db)},
        airflow_var,
        [
            "/jobs",
            "/decisions?job=wordcount&limit=2",
            "/decisions?job=Bad%20Name!",
            "/decisions?job=wordcount&limit=0",
        ],
    )
    assert result["import_errors"] == {}
    (jobs_code, jobs), (code, body), (bad_code, bad), (limit_code, _) = result["responses"]
    assert (jobs_code, jobs) == (200, {"jobs": ["wordcount"]})
    assert code == 200 and "state_db" not in body and str(tmp_path) not in json.dumps(result["responses"])  # no server paths
    assert [(d["ts"], d["action"], d["reason"]) for d in body["decisions"]] == [
        (1600.0, "reconfigure", "cheaper"),
        (2200.0, "keep", "settled"),
    ]
    assert body["decisions"][0]["target"]["parallelism"] == 12, "JSON columns come back as objects"
    assert bad_code == 422 and bad["detail"][0]["loc"] == ["query", "job"]
    assert limit_code == 422


def test_missing_state_database_is_a_404_naming_it_and_is_not_created(tmp_path: Path, airflow_var: Path) -> None:
    db = tmp_path / "nowhere" / "state.db"
    result = _call({"FLINKTUNE_STATE_DB": str(db)}, airflow_var, ["/jobs"])
    assert result["responses"] == [
        [
            404,
            {
                "detail": "no flinktune state database yet (FLINKTUNE_STATE_DB or FLINKTUNE_STATE_URL): no decision has been recorded"
            },
        ]
    ]
    assert not db.parent.exists()


def _record_three_decisions(db: Path, job: str) -> Configuration:
    store = SqliteStateStore(db)
    state = evaluate(job, raw_samples(job, 0, 600, rate=30000), default_space().maximum, 600, window_s=600)
    smaller = Configuration(12, 2, 2.0, 2048, 10)
    store.record_decision(DecisionRecord(job, 1000.0, state, Decision.keep("flinktune", "steady"), None))
    store.record_decision(
        DecisionRecord(
            job,
            1600.0,
            state,
            Decision(Action.RECONFIGURE, "cheaper <b>now</b>", "flinktune", target=smaller),
            RealizeResult(True, "redeploy", 40.0),
        )
    )
    # The next tick reads back what runs: the applied target.
    after = evaluate(job, raw_samples(job, 600, 1200, rate=30000), smaller, 1200, window_s=600)
    store.record_decision(DecisionRecord(job, 2200.0, after, Decision.keep("flinktune", "settled"), None))
    return smaller


def test_job_page_shows_config_decisions_champions_and_report_plots(tmp_path: Path, airflow_var: Path) -> None:
    from mlflow import MlflowClient

    db = tmp_path / "state.db"
    _record_three_decisions(db, "wordcount")
    _record_three_decisions(db, "clicks")
    from flinktune.decision.store import SqliteStateStore

    SqliteStateStore(db).set_mode("clicks", "act", by="alice", at=1_700_000_000.0)
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    client = MlflowClient(tracking_uri=uri, registry_uri=uri)
    client.create_registered_model("flinktune-surrogate-wordcount")
    for _ in range(2):
        client.create_model_version("flinktune-surrogate-wordcount", source=str(tmp_path / "artifacts"))
    client.set_registered_model_alias("flinktune-surrogate-wordcount", "champion", "2")
    reports = tmp_path / "reports"
    for stamp, plot in (("20250101T000000", "old.png"), ("20250102T000000", "rate_forecast.png")):
        folder = reports / f"wordcount-{stamp}"
        folder.mkdir(parents=True)
        (folder / "report.md").write_text("# report")
        (folder / plot).write_bytes(b"\x89PNG\r\n\x1a\n" + stamp.encode())

    env = {
        "FLINKTUNE_STATE_DB": str(db),
        "FLINKTUNE_MLFLOW_TRACKING_URI": uri,
        "FLINKTUNE_REPORTS_DIR": str(reports),
        "FLINKTUNE_MLFLOW_UI_URL": "http://mlflow.example:5000",
    }
    result = _call(
        env,
        airflow_var,
        [
            "/",
            "/job/wordcount",
            "/job/wordcount/plots/rate_forecast.png",
            "/job/wordcount/plots/old.png",
            "/job/wordcount/plots/..%2Fstate.db",
            "/job/Bad!",
            "/job/clicks",
        ],
    )
    (index_code, index), (code, page), (plot_code, plot), (old_code, _), (escape_code, _), (bad_code, _), (_, clicks) = result[
        "responses"
    ]
    assert index_code == 200 and 'href="/flinktune/job/wordcount"' in index  # mounted by Airflow at /flinktune
    # Each job's mode: advice unless switched to act, and who switched it when.
    assert 'wordcount</a> <span class="mode">(advise)</span>' in index and 'clicks</a> <span class="mode">(act)</span>' in index
    assert '<p id="mode"><strong>Mode:</strong> advise (every job starts in advice;' in page
    assert "act (`flinktune fleet act` by alice at 2023-11-14 22:13:20 UTC)" in clicks
    assert code == 200
    config = page.split('<table id="config">')[1].split("</table>")[0]
    assert "<th>parallelism</th><td>12</td>" in config, "the applied target is the configuration in force"
    decisions = page.split('<table id="decisions">')[1].split("</table>")[0]
    assert decisions.index("settled") < decisions.index("cheaper"), "newest first"
    assert "cheaper &lt;b&gt;now&lt;/b&gt;" in decisions and "<b>now" not in page, "reasons are escaped"
    assert "redeploy" in decisions
    champions = page.split('<ul id="champions">')[1].split("</ul>")[0]
    assert 'href="http://mlflow.example:5000/#/models/flinktune-surrogate-wordcount/versions/2"' in champions
    assert "flinktune-forecaster-wordcount" in champions and "no champion registered" in champions
    assert 'src="/flinktune/job/wordcount/plots/rate_forecast.png"' in page and "old.png" not in page, "the latest report only"
    assert str(tmp_path) not in page and "wordcount-20250102T000000/report.md under FLINKTUNE_REPORTS_DIR" in page, (
        "no server path"
    )
    assert plot_code == 200 and "20250102" in plot
    assert old_code == 404 and escape_code == 404 and bad_code == 422


def test_pages_without_any_state_say_so_and_create_nothing(tmp_path: Path, airflow_var: Path) -> None:
    db, mlflow_db = tmp_path / "none" / "state.db", tmp_path / "none" / "mlflow.db"
    env = {
        "FLINKTUNE_STATE_DB": str(db),
        "FLINKTUNE_MLFLOW_TRACKING_URI": f"sqlite:///{mlflow_db}",
        "FLINKTUNE_REPORTS_DIR": str(tmp_path / "none" / "reports"),
    }
    result = _call(env, airflow_var, ["/", "/job/demo"])
    (index_code, index), (code, page) = result["responses"]
    assert index_code == 200 and "no flinktune state database yet" in index and str(tmp_path) not in index + page
    assert code == 200 and "configuration in force is unknown" in page and "no MLflow database yet" in page
    assert "No report yet" in page
    assert not (tmp_path / "none").exists()


def test_data_docs_are_served_inside_the_site_only_and_the_report_links_there(tmp_path: Path, airflow_var: Path) -> None:
    """A browser refuses the report's file:// Data Docs links from the plugin's http page: the plugin
    serves the site and rewrites the links; a path out of the site is a 404."""
    from flinktune.orchestration.plugin_ui.data_docs import data_docs_root

    lake = tmp_path / "lake"
    site = data_docs_root(lake)
    (site / "validations").mkdir(parents=True)
    (site / "index.html").write_text("<h1>the Data Docs front page</h1>")
    (site / "validations" / "b1.html").write_text("batch b1 page")
    (lake / "secret.txt").write_text("beside the site")
    folder = tmp_path / "reports" / "wordcount-20250102T000000"
    folder.mkdir(parents=True)
    (folder / "report.md").write_text("# report")
    (folder / "report.html").write_text(f'<a href="{site.resolve().as_uri()}/index.html">Data Docs</a>')
    env = {
        "FLINKTUNE_LAKE_DIR": str(lake),
        "FLINKTUNE_REPORTS_DIR": str(tmp_path / "reports"),
        "FLINKTUNE_STATE_DB": str(tmp_path / "state.db"),
    }
    result = _call(
        env,
        airflow_var,
        [
            "/data-docs/index.html",
            "/data-docs/validations/b1.html",
            "/data-docs/..%2F..%2Fsecret.txt",
            "/data-docs/%2e%2e/%2e%2e/secret.txt",
            "/data-docs/missing.html",
            "/job/wordcount/report",
        ],
    )
    (code, front), (page_code, page), *refused, (report_code, report) = result["responses"]
    assert (code, page_code) == (200, 200) and "front page" in front and "batch b1" in page
    assert [c for c, _ in refused] == [404, 404, 404] and "beside the site" not in json.dumps(refused)
    assert report_code == 200 and 'href="/flinktune/data-docs/index.html"' in report and "file://" not in report
