"""The report with MLflow out of reach: one short attempt, the report written without the MLflow logging and
saying so, no password shown; with MLflow answering, the report is logged."""

from __future__ import annotations

import socket
import threading
from pathlib import Path

import mlflow
import pytest

from flinktune.settings import Settings, TimeoutSettings
from jobs.report import run
from tests.report_state import state_folder


@pytest.fixture
def restored_mlflow(monkeypatch):
    for var in ("MLFLOW_HTTP_REQUEST_TIMEOUT", "MLFLOW_HTTP_REQUEST_MAX_RETRIES"):
        monkeypatch.setenv(var, "")  # restored after the test: the report's configure() sets them
    uris = mlflow.get_tracking_uri(), mlflow.get_registry_uri()
    yield
    mlflow.set_tracking_uri(uris[0])
    mlflow.set_registry_uri(uris[1])


def _report(var: Path, uri: str | None) -> dict:
    settings = Settings(var_dir=var, mlflow_tracking_uri=uri, latency_target_ms=2000,
                        timeouts=TimeoutSettings(mlflow_request_s=1, mlflow_retries=3))  # fmt: skip
    return run(job="j", settings=settings)


def test_a_silent_mlflow_gets_one_short_attempt_and_the_report_says_it_was_not_logged(tmp_path, restored_mlflow):
    var = state_folder(tmp_path / "var")
    accepted: list[socket.socket] = []
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(8)
        listener.settimeout(0.2)
        stop = threading.Event()

        def accept() -> None:  # counts the connections; answers none
            while not stop.is_set():
                try:
                    accepted.append(listener.accept()[0])
                except TimeoutError:
                    continue

        thread = threading.Thread(target=accept, daemon=True)
        thread.start()
        try:
            result = _report(var, f"http://alice:S3CRETpw@127.0.0.1:{listener.getsockname()[1]}")
        finally:
            stop.set()
            thread.join()
            for conn in accepted:
                conn.close()
    # one connection, not MLflow's retries with back-off (3 allowed here)
    assert len(accepted) == 1 and result["mlflow_run_id"] is None
    assert "did not answer within 1 s (no answer)" in result["mlflow"] and "S3CRETpw" not in result["mlflow"]
    text = Path(result["report"]).read_text()
    assert f"Not logged to MLflow: {result['mlflow']}." in text and "S3CRETpw" not in text
    assert f"Not logged to MLflow: {result['mlflow']}." in Path(result["html"]).read_text()


def test_a_refused_mlflow_is_named_and_the_report_is_written(tmp_path, restored_mlflow):
    var = state_folder(tmp_path / "var")
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    result = _report(var, f"http://127.0.0.1:{port}/mlflow")
    assert result["mlflow_run_id"] is None and result["mlflow"] == (
        f"MLflow at http://127.0.0.1:{port}/mlflow did not answer within 1 s (connection refused)"
    )
    assert f"Not logged to MLflow: {result['mlflow']}." in Path(result["report"]).read_text()


def test_with_mlflow_answering_the_report_is_logged_and_says_nothing_about_it(tmp_path, restored_mlflow):
    var = state_folder(tmp_path / "var")
    result = _report(var, None)  # the folder's own SQLite store
    assert result["mlflow_run_id"] and result["mlflow"] == ""
    assert "MLflow" not in Path(result["report"]).read_text()
    run = mlflow.get_run(result["mlflow_run_id"])
    assert run.data.tags["verdict"] in ("met", "missed")
