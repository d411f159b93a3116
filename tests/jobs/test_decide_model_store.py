"""An unreachable model store is a hold that says so, within seconds.

Before: MLflow's defaults (7 retries with exponential backoff) made one unreachable tracking server
cost about 8 minutes per tick, and the decision said "no champion".
"""

from __future__ import annotations

import socket
import time

import mlflow
import pytest

from flinktune.backends import Backend
from flinktune.clock import ManualClock
from flinktune.config_space import default_space
from flinktune.decision import Action
from flinktune.decision.loop import LoopSettings, build_decision_loop
from flinktune.decision.store import MemoryStateStore
from flinktune.decision.testing import (
    FixedForecast,
    FixedModels,
    FrameMetricsSource,
    FunctionSurrogate,
    RecordingRealizer,
    raw_samples,
)
from flinktune.policies import make_policy

SPACE = default_space()


@pytest.fixture
def mlflow_at(tmp_path, monkeypatch):
    """Point MLflow at a URI with a 1 s request timeout and no retry; restored afterwards."""
    from models.registry import configure

    for var in ("MLFLOW_HTTP_REQUEST_TIMEOUT", "MLFLOW_HTTP_REQUEST_MAX_RETRIES"):
        monkeypatch.setenv(var, "")  # restored after the test: configure() below sets them
    uris = mlflow.get_tracking_uri(), mlflow.get_registry_uri()
    yield lambda uri: configure(uri, tmp_path / "artifacts", request_timeout_s=1, max_retries=0)
    mlflow.set_tracking_uri(uris[0])
    mlflow.set_registry_uri(uris[1])


@pytest.mark.parametrize("server", ["refused", "silent"])
def test_an_unreachable_model_store_is_reported_as_such_within_seconds(mlflow_at, server):
    from flinktune.decision.providers import load_champion

    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        if server == "silent":
            listener.listen(4)  # accepts connections, never answers: only the request timeout ends the wait
        port = listener.getsockname()[1]
        if server == "refused":
            listener.close()
        mlflow_at(f"http://127.0.0.1:{port}")
        t0 = time.monotonic()
        model, problem = load_champion("flinktune-surrogate-demo")
        took = time.monotonic() - t0
    assert took < 5, f"{server}: {took:.1f} s"
    assert model is None and problem.startswith("model store unreachable") and "flinktune-surrogate-demo" in problem


def test_a_model_store_problem_is_a_hold_with_its_reason():
    models = FixedModels(FunctionSurrogate(SPACE), 1e6)
    models.problem = "model store unreachable: model store http://mlflow:5000 did not answer"
    realizer = RecordingRealizer(SPACE.maximum)
    loop = build_decision_loop(
        Backend("test", FrameMetricsSource(raw_samples("j", 0, 1200, rate=20000, p95=120)), realizer, ManualClock(600)),
        LoopSettings("j", 250.0),
        policy=make_policy("flinktune", SPACE, memory_headroom=0.7),
        space=SPACE,
        store=MemoryStateStore(),
        forecaster=FixedForecast(20000),
        models=models,
    )
    out = loop.step()
    assert out.decision.action is Action.KEEP and "model store unreachable" in out.decision.reason and not realizer.applied


def test_a_tracking_uris_password_is_in_no_reason_message_or_stored_row(mlflow_at, tmp_path, caplog):
    """The URI's user info reaches neither the champion problem, the decision's reason, the log,
    nor the state store's row (which the plugin shows every viewer)."""
    from flinktune.decision.providers import load_champion
    from flinktune.decision.store import SqliteStateStore

    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        port = listener.getsockname()[1]
    uri = f"http://alice:S3CRETpw@127.0.0.1:{port}"
    mlflow_at(uri)
    with caplog.at_level("DEBUG"):
        _, problem = load_champion("flinktune-surrogate-demo")
    assert problem and "S3CRETpw" not in problem and "S3CRETpw" not in caplog.text
    models = FixedModels(FunctionSurrogate(SPACE), 1e6)
    models.problem = f"model store unreachable: model store {uri} did not answer"  # as a client library might word it
    store = SqliteStateStore(tmp_path / "state.db")
    loop = build_decision_loop(
        Backend("test", FrameMetricsSource(raw_samples("j", 0, 1200, rate=20000, p95=120)), RecordingRealizer(SPACE.maximum), ManualClock(600)),
        LoopSettings("j", 250.0), policy=make_policy("flinktune", SPACE, memory_headroom=0.7), space=SPACE,
        store=store, forecaster=FixedForecast(20000), models=models,
    )  # fmt: skip
    out = loop.step()
    assert out.decision.action is Action.KEEP and "model store unreachable" in out.decision.reason
    assert "S3CRETpw" not in out.decision.reason and "http://***@127.0.0.1" in out.decision.reason
    rows = store.decisions("j")
    assert len(rows) and not rows.astype(str).apply(lambda col: col.str.contains("S3CRETpw")).any().any()
