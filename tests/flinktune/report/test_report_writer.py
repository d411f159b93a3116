import json

import numpy as np
import pandas as pd
import pytest

from flinktune.config_space import Configuration, default_space
from flinktune.decision import Action, Decision
from flinktune.decision.evaluation import evaluate
from flinktune.decision.stages import DecisionRecord, RealizeResult
from flinktune.decision.store import SqliteStateStore
from flinktune.decision.testing import StaticForecaster, raw_samples
from flinktune.report import ReportInputs, write_report

SPACE = default_space()


def features(minutes=120, small_after=60):
    t = pd.date_range("2026-01-01", periods=minutes, freq="60s", tz="UTC")
    big = np.arange(minutes) < small_after
    return pd.DataFrame(
        {
            "job": "j",
            "window_start": t,
            "input_rate": 30000.0,
            "throughput": 30000.0,
            "lag": 100.0,
            "latency_p50_ms": 80.0,
            "latency_p95_ms": np.where(big, 150.0, 300.0),
            "cpu_used": 6.0,
            "memory_used_mb": 9000.0,
            "taskmanagers": np.where(big, 24, 6),
            "cpu": np.where(big, 1.0, 2.0),
            "memory_mb": np.where(big, 4096, 2048),
            "parallelism": np.where(big, 24, 12),
            "task_slots": np.where(big, 1, 2),
            "checkpoint_interval_s": 10,
        }
    )


def test_report_writes_markdown_plots_and_a_true_summary(tmp_path):
    store = SqliteStateStore(tmp_path / "s.db")
    st = evaluate("j", raw_samples("j", 0, 600, rate=30000), SPACE.maximum, 600, window_s=600)
    target = Configuration(12, 2, 2.0, 2048, 10)
    store.record_decision(
        DecisionRecord(
            "j",
            1767229200.0,
            st,
            Decision(Action.RECONFIGURE, "save 50 % | cheaper", "flinktune", target=target),
            RealizeResult(True, "redeploy", 45.0),
        )
    )
    fc = StaticForecaster(30000).predict(pd.Series([1.0], index=[pd.Timestamp("2026-01-01T01:00", tz="UTC")]), 600)
    store.record_forecast("j", 1767229200.0, fc.model, 31500.0, fc.to_frame())
    inputs = ReportInputs("j", features(), store.decisions("j"), store.forecasts("j"), 1000.0, SPACE)
    path = write_report(inputs, tmp_path / "reports")
    text = path.read_text()
    assert "save 50 % / cheaper" in text  # pipes in reasons do not break the table
    for png in ["rate_forecast.png", "configuration.png", "latency.png", "resources.png"]:
        assert (path.parent / png).stat().st_size > 5000
    s = json.loads((path.parent / "summary.json").read_text())
    # first hour at 24 cores, second at 12 cores: 36 core-hours over 2 h of a 24-core maximum
    assert s["cpu_core_hours"] == pytest.approx(36.0) and s["cpu_vs_static"] == pytest.approx(0.75)
    assert s["reconfigurations"] == 1 and s["downtime_s"] == 45.0
    assert not list((tmp_path / "reports").glob(".*"))  # no temporary folder left behind


def test_report_refuses_empty_features(tmp_path):
    empty = features().iloc[:0]
    with pytest.raises(ValueError, match="no curated features"):
        write_report(ReportInputs("j", empty, pd.DataFrame(), pd.DataFrame(), 1000.0, SPACE), tmp_path)


def test_summary_json_has_the_tuned_period_apart(tmp_path):
    store = SqliteStateStore(tmp_path / "s.db")
    st = evaluate("j", raw_samples("j", 0, 600, rate=30000), SPACE.maximum, 600, window_s=600)
    f = features()
    for minute in (60, 70):  # two decisions ten minutes apart: the tuner is in charge from minute 50
        ts = f["window_start"][minute].timestamp()
        store.record_decision(DecisionRecord("j", ts, st, Decision.keep("flinktune", "fine"), None))
    path = write_report(ReportInputs("j", f, store.decisions("j"), store.forecasts("j"), 1000.0, SPACE), tmp_path / "r")
    s = json.loads((path.parent / "summary.json").read_text())
    assert s["hours"] == pytest.approx(2.0) and s["tuned"]["hours"] == pytest.approx(70 / 60)
    text = path.read_text()
    assert "| measure | before tuning | tuned |" in text
    # no counterfactual: judged against the target itself and static's fixed reservation, recovery not judged
    assert "## No counterfactual" in text and "- **recovery limit: not judged.**" in text
    assert s["verdict"]["checks"][2]["met"] is True  # 1 h at 24 cores, then 12 cores: cheaper than static's 24 throughout
