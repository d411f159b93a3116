"""``flinktune ui``: the Airflow UI with the flinktune page and the MLflow UI over a state folder, seen in Chromium.

The state folder is built with the project's own code (the decision store, MLflow's client, a migrated
Airflow home), the command runs as a user starts it, and Ctrl-C (SIGINT) must stop both servers.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import pytest
from typer.testing import CliRunner

from flinktune.cli.main import app
from flinktune.config_space import Configuration, default_space
from flinktune.decision import Action, Decision
from flinktune.decision.evaluation import evaluate
from flinktune.decision.stages import DecisionRecord, RealizeResult
from flinktune.decision.store import SqliteStateStore
from flinktune.decision.testing import raw_samples

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking",
                  "--disable-component-update", "--disable-sync"]  # fmt: skip


def _state_folder(var: Path) -> None:
    """Three decisions of job ``demo`` in the state store and a surrogate champion in the folder's MLflow."""
    from mlflow import MlflowClient

    store = SqliteStateStore(var / "state" / "flinktune.db")
    state = evaluate("demo", raw_samples("demo", 0, 600, rate=30000), default_space().maximum, 600, window_s=600)
    store.record_decision(DecisionRecord("demo", 1000.0, state, Decision.keep("flinktune", "load steady, keep"), None))
    store.record_decision(DecisionRecord("demo", 1600.0, state, Decision(Action.RECONFIGURE, "cheaper shape fits the forecast peak",
                                                          "flinktune", target=Configuration(12, 2, 2.0, 2048, 10)), RealizeResult(True, "redeploy", 40.0)))  # fmt: skip
    store.record_decision(DecisionRecord("demo", 2200.0, state, Decision.keep("flinktune", "settled after the change"), None))
    uri = f"sqlite:///{var / 'mlflow' / 'mlflow.db'}"
    (var / "mlflow").mkdir(parents=True)
    client = MlflowClient(tracking_uri=uri, registry_uri=uri)
    client.create_registered_model("flinktune-surrogate-demo")
    client.create_model_version("flinktune-surrogate-demo", source=str(var / "mlflow" / "artifacts"))
    client.set_registered_model_alias("flinktune-surrogate-demo", "champion", "1")


def test_a_folder_without_state_is_refused_in_one_line(tmp_path: Path) -> None:
    res = CliRunner().invoke(app, ["ui", "--var-dir", str(tmp_path)])
    assert res.exit_code == 2 and "holds no flinktune state" in res.output and len(res.output.strip().splitlines()) == 1


def test_a_port_in_use_is_refused_before_anything_starts(tmp_path: Path) -> None:
    (tmp_path / "state").mkdir()
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        res = CliRunner().invoke(app, ["ui", "--var-dir", str(tmp_path), "--airflow-port", str(port)])
    assert res.exit_code == 2 and f"--airflow-port {port}: something already listens" in res.output
    assert not (tmp_path / "airflow").exists() and not (tmp_path / "logs").exists()


@pytest.mark.airflow
@pytest.mark.slow
@pytest.mark.timeout(420)
def test_ui_serves_the_flinktune_page_and_mlflow_in_chromium_and_ctrl_c_stops_both(tmp_path: Path, airflow_var: Path) -> None:
    if not os.access(CHROMIUM, os.X_OK):
        pytest.skip(f"{CHROMIUM} is missing: install Debian's chromium package")
    sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed (pip install -e '.[test]')")
    var = tmp_path / "var"
    shutil.copytree(airflow_var / "airflow", var / "airflow")  # a migrated Airflow home, as the demo leaves it
    _state_folder(var)
    out = tmp_path / "ui.out"
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    with open(out, "w") as sink:
        proc = subprocess.Popen([sys.executable, "-m", "flinktune.cli.main", "ui", "--var-dir", str(var), "--airflow-port", "0",
                                 "--mlflow-port", "0"], stdout=sink, stderr=subprocess.STDOUT, env=env, start_new_session=True)  # fmt: skip
    try:
        deadline = time.monotonic() + 360
        while "Ctrl-C stops both." not in out.read_text():
            assert proc.poll() is None, f"flinktune ui exited with {proc.returncode}:\n{out.read_text()[-3000:]}"
            assert time.monotonic() < deadline, f"flinktune ui did not come up:\n{out.read_text()[-3000:]}"
            time.sleep(1)
        text = out.read_text()
        login = re.search(r"Airflow UI:\s+(http://127\.0\.0\.1:\d+/)\s+\(login: admin / (\S+)\)", text)
        flinktune_url = re.search(r"flinktune page:\s+(\S+)", text)
        mlflow_url = re.search(r"MLflow UI:\s+(http://127\.0\.0\.1:\d+/)", text)
        assert login and flinktune_url and mlflow_url, text
        airflow_base, password = login.group(1), login.group(2)
        request = urllib.request.Request(f"{airflow_base}auth/token", method="POST", headers={"Content-Type": "application/json"},
                                         data=json.dumps({"username": "admin", "password": password}).encode())  # fmt: skip
        with urllib.request.urlopen(request, timeout=60) as answer:
            token = json.loads(answer.read())["access_token"]  # the printed login is Airflow's own
        with sync_api.sync_playwright() as p:
            browser = p.chromium.launch_persistent_context(tempfile.mkdtemp(dir=tmp_path), executable_path=CHROMIUM, headless=True,
                                                           args=CHROMIUM_FLAGS)  # fmt: skip
            page = browser.new_page()
            refused = page.goto(f"{flinktune_url.group(1)}job/demo")
            assert refused is not None and refused.status == 401, "without Airflow's login the page is refused"
            # the cookie Airflow's UI sets at login
            browser.add_cookies([{"name": "_token", "value": token, "url": airflow_base}])
            shown = page.goto(airflow_base)
            assert shown is not None and shown.ok and "Airflow" in page.title()
            index = page.goto(flinktune_url.group(1))
            assert index is not None and index.ok and 'href="/flinktune/job/demo"' in page.content()
            page.click('a[href="/flinktune/job/demo"]')
            decisions = page.locator("#decisions").inner_text()
            assert "cheaper shape fits the forecast peak" in decisions and "settled after the change" in decisions
            assert "load steady, keep" in decisions
            champion = page.locator("#champions a").first.get_attribute("href") or ""
            assert champion.startswith(mlflow_url.group(1)), "the champion links to the MLflow UI that was started"
            page.goto(f"{mlflow_url.group(1)}#/models")
            page.wait_for_selector("text=flinktune-surrogate-demo", timeout=60_000)  # the folder's own store
            assert "MLflow" in page.title()
            browser.close()
        ports = [int(u.rsplit(":", 1)[1].strip("/")) for u in (airflow_base, mlflow_url.group(1))]
        proc.send_signal(signal.SIGINT)  # Ctrl-C
        assert proc.wait(timeout=90) == 0, out.read_text()[-3000:]
        for port in ports:
            with socket.socket() as probe:
                assert probe.connect_ex(("127.0.0.1", port)) != 0, f"port {port} still listens after Ctrl-C"
        assert "airflow-api-server stopped" in out.read_text() and "mlflow-ui stopped" in out.read_text()
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
