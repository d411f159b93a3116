import json

import pytest

from flinktune.backends import Backend
from flinktune.clock import ManualClock
from flinktune.config_space import default_space
from flinktune.decision import Action
from flinktune.decision.evaluation import evaluate, rate_series
from flinktune.decision.loop import LoopSettings, build_decision_loop
from flinktune.decision.store import SqliteStateStore
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


def test_evaluate_summarises_a_window():
    df = raw_samples("j", 1000, 600, rate=30000, lag=500, p95=180)
    st = evaluate("j", df, SPACE.maximum, now=1600, window_s=600)
    assert st.fresh and st.running and not st.problems
    assert st.input_rate == pytest.approx(30000) and st.throughput == pytest.approx(30000)
    assert st.lag == 500 and st.latency_p95_ms == pytest.approx(180) and st.busy_ratio == pytest.approx(0.5)


def test_evaluate_flags_stale_missing_nan_and_stopped():
    df = raw_samples("j", 0, 60, rate=30000, running=0.0)
    st = evaluate("j", df, SPACE.maximum, now=1000, window_s=600)
    assert not st.fresh and any("stale" in p for p in st.problems) and any("not running" in p for p in st.problems)
    df2 = raw_samples("j", 0, 60, rate=30000)
    df2 = df2[df2["metric"] != "pendingRecords"].copy()
    df2.loc[df2.index[0], "value"] = float("nan")
    st2 = evaluate("j", df2, SPACE.maximum, now=60, window_s=60)
    assert any("missing metrics ['pendingRecords']" in p for p in st2.problems)
    assert any("non-finite" in p for p in st2.problems)


#: Changes that cost next to nothing: these tests are about the loop, not the price of a change.
CHEAP_CHANGES = {"rescale": (1.0, 0.0), "redeploy": (1.0, 0.0)}


def test_rate_series_has_utc_index():
    s = rate_series(raw_samples("j", 0, 10, rate=5.0), "j")
    assert str(s.index.tz) == "UTC" and len(s) == 10 and (s == 5.0).all()


def test_loop_reconfigures_records_and_explains(tmp_path):
    # memory_headroom=0.7: FunctionSurrogate predicts heap use at 60 % of every reservation, which
    # flinktune's default 50 % heap headroom refuses (then it keeps the maximum).
    frame = raw_samples("j", 0, 1200, rate=20000, p95=120)
    realizer = RecordingRealizer(SPACE.maximum)
    store = SqliteStateStore(tmp_path / "state.db")
    clock = ManualClock(600)
    loop = build_decision_loop(
        Backend("test", FrameMetricsSource(frame), realizer, clock),
        LoopSettings("j", 250.0),
        policy=make_policy("flinktune", SPACE, memory_headroom=0.7, change_priors=CHEAP_CHANGES),
        space=SPACE,
        store=store,
        forecaster=FixedForecast(20000),
        models=FixedModels(FunctionSurrogate(SPACE), 1e6),
    )
    out = loop.step()
    assert out.decision.action is Action.RECONFIGURE and realizer.applied == [out.decision.target]
    clock.advance(60)
    out2 = loop.step()  # inside the stabilization window
    assert out2.decision.action is Action.KEEP
    rows = store.decisions("j")
    assert list(rows["action"]) == ["reconfigure", "keep"]
    assert rows["changed"].tolist() == [1, 0] and all(r.strip() for r in rows["reason"])
    assert json.loads(rows["state"][0])["input_rate"] == pytest.approx(20000)
    memory = store.policy_memory("j", "flinktune")  # saved with the decision; the next run restores it
    # the change decided at t=600 was seen running at the next decision: it counts against the budget
    assert memory["shape"] is not None and memory["proposed"] is None and memory["changes"] == {"last": 600.0, "counted": [600.0]}


def test_loop_dry_run_changes_nothing(tmp_path):
    realizer = RecordingRealizer(SPACE.maximum)
    store = SqliteStateStore(tmp_path / "s.db")
    loop = build_decision_loop(
        Backend("test", FrameMetricsSource(raw_samples("j", 0, 600, rate=20000, p95=120)), realizer, ManualClock(600)),
        LoopSettings("j", 250.0, dry_run=True),
        policy=make_policy("flinktune", SPACE, memory_headroom=0.7, change_priors=CHEAP_CHANGES),
        space=SPACE,
        store=store,
        forecaster=FixedForecast(20000),
        models=FixedModels(FunctionSurrogate(SPACE), 1e6),
    )
    out = loop.step()
    assert out.decision.action is Action.RECONFIGURE and realizer.applied == [] and out.result is None
    assert store.policy_memory("j", "flinktune") is None  # a dry run changes nothing, the policy's memory included
