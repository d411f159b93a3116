"""`airflow standalone` end to end: trigger a DAG through REST API v2 with a token, read the plugin (same token).

Starts the real scheduler, DAG processor, triggerer and API server (parallelism 2) in a temporary
AIRFLOW_HOME on 127.0.0.1 with free ports, in its own process group, which the test stops as a
whole. The DAG run is ``flinktune_replay`` on 15 minutes of trace: it exercises the real job
code, the params and the task SDK, and finishes in seconds once scheduled.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import requests

from flinktune.airflow_local.airflow_home import airflow_env
from flinktune.config_space import default_space
from flinktune.decision import Decision
from flinktune.decision.evaluation import evaluate
from flinktune.decision.stages import DecisionRecord
from flinktune.decision.store import SqliteStateStore
from flinktune.decision.testing import raw_samples

pytestmark = [pytest.mark.airflow, pytest.mark.slow, pytest.mark.e2e, pytest.mark.servers, pytest.mark.timeout(240)]

DAG_ID = "flinktune_replay"
CONF = {"trace": "ysb", "policies": "static", "hours": 0.25, "failures": "none", "seed": 3}


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _wait(what: str, check, deadline: float, proc: subprocess.Popen, log: Path, every: float = 1.0):
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            pytest.fail(
                f"airflow standalone exited with {proc.returncode} while waiting for {what}; log:\n"
                + log.read_text(errors="replace")[-3000:]
            )
        try:
            result = check()
        except (requests.ConnectionError, requests.Timeout):
            result = None  # a server busy on two shared cores: poll again until the deadline
        if result:
            return result
        time.sleep(every)
    pytest.fail(f"timed out waiting for {what}; log tail:\n{log.read_text(errors='replace')[-3000:]}")


def _stop_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    except ProcessLookupError:
        return
    try:  # stragglers that outlived the standalone parent (task runners, gunicorn workers)
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def test_standalone_runs_a_dag_triggered_through_the_rest_api_and_serves_the_plugin(tmp_path: Path) -> None:
    started = time.monotonic()
    var = tmp_path / "var"
    state = evaluate("demo", raw_samples("demo", 0, 600, rate=30000), default_space().maximum, 600, window_s=600)
    SqliteStateStore(var / "state" / "flinktune.db").record_decision(
        DecisionRecord("demo", 600.0, state, Decision.keep("flinktune", "standalone smoke"), None)
    )
    port = _free_port()
    base = f"http://127.0.0.1:{port}"
    env = {
        **os.environ,
        **airflow_env(var),
        "FLINKTUNE_VAR_DIR": str(var),
        "SPARK_LOCAL_IP": "127.0.0.1",
        "MLFLOW_DISABLE_TELEMETRY": "true",
        # standalone starts its components as `airflow ...` from PATH: use this interpreter's.
        "PATH": os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")]),
        "AIRFLOW__CORE__PARALLELISM": "2",
        "AIRFLOW__API__HOST": "127.0.0.1",
        "AIRFLOW__API__PORT": str(port),
        "AIRFLOW__API__WORKERS": "1",
        "AIRFLOW__API__BASE_URL": base,
        "AIRFLOW__CORE__EXECUTION_API_SERVER_URL": f"{base}/execution/",
        "AIRFLOW__LOGGING__WORKER_LOG_SERVER_PORT": str(_free_port()),
        "AIRFLOW__LOGGING__TRIGGER_LOG_SERVER_PORT": str(_free_port()),
        "AIRFLOW__SCHEDULER__SCHEDULER_HEARTBEAT_SEC": "2",
    }
    home = Path(env["AIRFLOW_HOME"])
    home.mkdir(parents=True)
    log = tmp_path / "standalone.log"
    with open(log, "w") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "airflow", "standalone"],
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            cwd=tmp_path,
        )
    try:
        deadline = started + 170
        _wait("the API server", lambda: requests.get(f"{base}/api/v2/monitor/health", timeout=5).ok, deadline, proc, log)
        passwords = home / "simple_auth_manager_passwords.json.generated"
        password = _wait(
            "the generated admin password",
            lambda: passwords.is_file() and json.loads(passwords.read_text() or "{}").get("admin"),
            deadline,
            proc,
            log,
        )
        token_response = requests.post(f"{base}/auth/token", json={"username": "admin", "password": password}, timeout=10)
        assert token_response.status_code in (200, 201), token_response.text
        api = requests.Session()
        api.headers["Authorization"] = f"Bearer {token_response.json()['access_token']}"

        assert requests.get(f"{base}/api/v2/dags/{DAG_ID}", timeout=10).status_code == 401, "the API needs the token"
        _wait(f"{DAG_ID} to be parsed", lambda: api.get(f"{base}/api/v2/dags/{DAG_ID}", timeout=10).ok, deadline, proc, log)
        assert api.patch(f"{base}/api/v2/dags/{DAG_ID}", json={"is_paused": False}, timeout=10).ok

        bad = api.post(f"{base}/api/v2/dags/{DAG_ID}/dagRuns", json={"logical_date": None, "conf": {"hours": -1}}, timeout=10)
        assert bad.status_code == 400 and "hours" in bad.text, "a bad param is refused before any run exists"
        created = api.post(f"{base}/api/v2/dags/{DAG_ID}/dagRuns", json={"logical_date": None, "conf": CONF}, timeout=10)
        assert created.status_code == 200, created.text
        run_id = created.json()["dag_run_id"]

        def finished() -> str | None:
            run_state = api.get(f"{base}/api/v2/dags/{DAG_ID}/dagRuns/{run_id}", timeout=10).json()["state"]
            return run_state if run_state in ("success", "failed") else None

        assert _wait(f"run {run_id}", finished, deadline, proc, log, every=2.0) == "success", log.read_text()[-3000:]
        tis = api.get(f"{base}/api/v2/dags/{DAG_ID}/dagRuns/{run_id}/taskInstances", timeout=10).json()["task_instances"]
        assert [(ti["task_id"], ti["state"]) for ti in tis] == [("replay", "success")]
        replay_dir = var / "reports" / "replay"
        assert [p.name for p in replay_dir.iterdir()] and list(replay_dir.glob("*/replay-ysb.md"))

        assert requests.get(f"{base}/flinktune/jobs", timeout=10).status_code == 401, "the plugin needs the token too"
        index = api.get(f"{base}/flinktune/", timeout=30)
        page = api.get(f"{base}/flinktune/job/demo", timeout=30)
        assert index.status_code == 200 and 'href="/flinktune/job/demo"' in index.text
        assert page.status_code == 200 and "standalone smoke" in page.text
        assert api.get(f"{base}/flinktune/jobs", timeout=10).json() == {"jobs": ["demo"]}
    finally:
        _stop_group(proc)
    gone_by = time.monotonic() + 15  # killed children are reaped by init a moment later
    while time.monotonic() < gone_by:
        try:
            os.killpg(proc.pid, 0)
        except ProcessLookupError:
            break
        time.sleep(0.5)
    else:
        pytest.fail(f"processes of group {proc.pid} are still alive after stopping standalone")
    assert time.monotonic() - started < 180, "the standalone test must stay under 3 minutes"
