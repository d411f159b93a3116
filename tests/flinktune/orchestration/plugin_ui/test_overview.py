"""The job page's champions with MLflow out of reach: one bounded attempt, a note that says so, no wait per model."""

from __future__ import annotations

import socket
import time

import pytest

from flinktune.orchestration.plugin_ui.overview import CHAMPION_KINDS, _champions
from flinktune.settings import TimeoutSettings


@pytest.fixture
def silent_server():
    """A TCP port that accepts connections (the kernel's backlog) and never answers: a hung MLflow."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(64)
    yield f"http://alice:S3CRETpw@127.0.0.1:{sock.getsockname()[1]}"
    sock.close()


def test_an_mlflow_that_never_answers_costs_one_bounded_attempt(silent_server):
    t0 = time.monotonic()
    out = _champions("demo", silent_server, TimeoutSettings(mlflow_request_s=2, mlflow_retries=0))
    wall = time.monotonic() - t0
    assert wall < 15, f"{wall:.0f} s"
    assert [c["kind"] for c in out] == list(CHAMPION_KINDS)
    assert all(c["version"] is None and c["note"].startswith("MLflow did not answer") for c in out), out
    assert "S3CRETpw" not in repr(out)


def test_a_corrupt_local_mlflow_database_is_an_error_not_no_champion(tmp_path):
    db = tmp_path / "mlflow.db"
    db.write_bytes(b"\x00garbage" * 500)
    out = _champions("demo", f"sqlite:///{db}")
    assert all(c["note"].startswith("MLflow store unreadable") and "not a database" in c["note"] for c in out), out
