"""The report with MLflow out of reach: written without the MLflow logging, within seconds, and saying so."""

from __future__ import annotations

import logging
import socket
import time

import mlflow

from flinktune.settings import Settings, TimeoutSettings
from jobs.report import _log_to_mlflow


def test_a_silent_mlflow_costs_the_report_seconds_and_is_named_without_its_password(tmp_path, monkeypatch, caplog):
    for var in ("MLFLOW_HTTP_REQUEST_TIMEOUT", "MLFLOW_HTTP_REQUEST_MAX_RETRIES"):
        monkeypatch.setenv(var, "")  # restored after the test: the report's configure() sets them
    uris = mlflow.get_tracking_uri(), mlflow.get_registry_uri()
    folder = tmp_path / "report"
    folder.mkdir()
    (folder / "report.md").write_text("# report\n")
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(8)  # accepts, never answers
        uri = f"http://alice:S3CRETpw@127.0.0.1:{listener.getsockname()[1]}"
        settings = Settings(var_dir=tmp_path / "var", mlflow_tracking_uri=uri,
                            timeouts=TimeoutSettings(mlflow_request_s=2, mlflow_retries=0))  # fmt: skip
        t0 = time.monotonic()
        try:
            with caplog.at_level(logging.WARNING):
                run_id = _log_to_mlflow(settings, "demo", folder, {"verdict": {"met": True, "headline": "ok"}, "hours": 1.0})
        finally:
            mlflow.set_tracking_uri(uris[0])
            mlflow.set_registry_uri(uris[1])
        wall = time.monotonic() - t0
    assert run_id is None and wall < 30, f"{wall:.0f} s"
    assert "written without the MLflow logging" in caplog.text and "S3CRETpw" not in caplog.text
