"""TwinJob: emitted samples, determinism, persistence and the flow invariants (property tests)."""

from __future__ import annotations

import json
import time

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from flinktune.config_space import ConfigSpace, Configuration
from flinktune.metrics.schema import CONFIG_METRICS, METRICS, validate_frame
from flinktune.twin.profile import ClusterProfile
from flinktune.twin.simulator import HISTORY_COLUMNS, TwinJob

PROFILE = ClusterProfile.default()
MAX = ConfigSpace().maximum
SMALL = Configuration(8, 2, 2.0, 2048, 30)
FEW = settings(max_examples=12, deadline=None)


def _rates(n: int, level: float = 50_000.0, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return level * (1 + 0.3 * np.sin(np.arange(n) / 300.0)) + rng.normal(0, 500, n).clip(-1000, 1000)


def test_samples_have_raw_schema_every_metric_every_second() -> None:
    twin = TwinJob(PROFILE, SMALL, job="j1", start_ts=1_700_000_000)
    df = twin.run(_rates(90))
    validate_frame(df)
    assert set(df["metric"].unique()) == set(METRICS)
    per_second = df.groupby("ts_ms").size()
    assert len(per_second) == 90 and per_second.nunique() == 1
    assert df["ts_ms"].min() == 1_700_000_000_000 and twin.now == 1_700_000_090
    vertex_rows = df[df["vertex"] != ""]
    assert set(vertex_rows["vertex"]) == {"source", "lookup", "window", "sink"} and (vertex_rows["subtask"] == -1).all()
    last = df[df["ts_ms"] == df["ts_ms"].max()].set_index("metric")
    for knob, metric in CONFIG_METRICS.items():
        assert last.loc[metric, "value"] == float(getattr(SMALL, knob))
    assert last.loc["taskManagers", "value"] == 4 and last.loc["taskSlotsTotal", "value"] == 8
    h = twin.history()
    assert list(h.columns) == list(HISTORY_COLUMNS) and len(h) == 90 and str(h["ts"].dt.tz) == "UTC"


def test_subtask_detail_splits_records_over_subtasks() -> None:
    cfg = SMALL.with_(vertex_parallelism={"window": 4})
    by_vertex = TwinJob(PROFILE, cfg, seed=1).run(_rates(30))
    by_subtask = TwinJob(PROFILE, cfg, seed=1, detail="subtask").run(_rates(30))
    win = by_subtask[(by_subtask["vertex"] == "window") & (by_subtask["metric"] == "numRecordsInPerSecond")]
    assert sorted(win["subtask"].unique()) == [0, 1, 2, 3]
    total = win.groupby("ts_ms")["value"].sum().to_numpy()
    ref = by_vertex[(by_vertex["vertex"] == "window") & (by_vertex["metric"] == "numRecordsInPerSecond")]["value"].to_numpy()
    np.testing.assert_allclose(total, ref)


def test_same_seed_identical_frames_other_seed_differs() -> None:
    runs = [TwinJob(PROFILE, MAX, seed=s, failures="random:6/h").run(_rates(1800)) for s in (4, 4, 5)]
    pd.testing.assert_frame_equal(runs[0], runs[1])
    assert not runs[0]["value"].equals(runs[2]["value"])


def test_chunked_run_equals_one_run() -> None:
    rates = _rates(3000, 70_000)
    one = TwinJob(PROFILE, SMALL, seed=2, failures="every:10m")
    whole = one.run(rates)
    parts = TwinJob(PROFILE, SMALL, seed=2, failures="every:10m")
    chunks = [parts.run(rates[a:b]) for a, b in [(0, 7), (7, 1000), (1000, 3000)]]
    pd.testing.assert_frame_equal(whole, pd.concat(chunks, ignore_index=True))
    assert one.restarts == parts.restarts >= 4


@FEW
@given(split=st.integers(1, 1500), seed=st.integers(0, 2**31), level=st.floats(20_000, 120_000))
def test_state_dict_round_trip_continues_identically(split: int, seed: int, level: float) -> None:
    rates = _rates(1600, level, seed % 7)
    a = TwinJob(PROFILE, SMALL, seed=seed, failures="every:5m")
    a.run(rates[:split])
    b = TwinJob.from_state_dict(json.loads(json.dumps(a.state_dict())))
    pd.testing.assert_frame_equal(a.run(rates[split:]), b.run(rates[split:]))
    assert a.state_dict() == b.state_dict()


def test_save_load_keeps_history_and_leaves_no_temp_files(tmp_path) -> None:
    twin = TwinJob(PROFILE, SMALL, seed=3, failures="every:5m")
    twin.run(_rates(700))
    twin.apply(SMALL.with_(parallelism=12, task_slots=2))
    path = twin.save(tmp_path / "t" / "twin.json")
    back = TwinJob.load(path)
    pd.testing.assert_frame_equal(back.history(), twin.history())
    assert back.reconfigurations == twin.reconfigurations and back.config == twin.config
    pd.testing.assert_frame_equal(back.run(_rates(300)), twin.run(_rates(300)))
    assert sorted(p.name for p in (tmp_path / "t").iterdir()) == ["twin.json", "twin.json.history.parquet"]


def test_load_names_the_bad_file(tmp_path) -> None:
    bad = tmp_path / "twin.json"
    bad.write_text("{not json")
    with pytest.raises(ValueError, match=r"twin.json: cannot read twin state"):
        TwinJob.load(bad)


def test_bad_rates_are_named() -> None:
    with pytest.raises(ValueError, match="position 2"):
        TwinJob(PROFILE, SMALL).run(np.array([1.0, 2.0, np.nan]))


@FEW
@given(
    seed=st.integers(0, 1000),
    level=st.floats(5_000, 200_000),
    cfg=st.sampled_from(ConfigSpace().candidates()[::37]),
)
def test_throughput_never_exceeds_input_plus_backlog(seed: int, level: float, cfg: Configuration) -> None:
    rates = _rates(1200, level, seed)
    twin = TwinJob(PROFILE, cfg, seed=seed, failures="random:20/h")
    twin.run(rates)
    h = twin.history()
    thr, lag = h["throughput"].to_numpy(), h["lag"].to_numpy()
    prev_lag = np.concatenate([[0.0], lag[:-1]])
    assert (thr <= rates + prev_lag + 1e-6).all()
    assert (lag >= 0).all() and (thr >= 0).all()
    if twin.restarts == 0:  # conservation without replays
        assert lag[-1] == pytest.approx(rates.sum() - thr.sum(), rel=1e-9, abs=1e-3)


@FEW
@given(seed=st.integers(0, 1000), level=st.floats(10_000, 150_000), extra=st.sampled_from([1.0, 2.0]))
def test_more_capacity_never_raises_lag(seed: int, level: float, extra: float) -> None:
    base = Configuration(12, 3, 1.0, 4096, 30)
    more = base.with_(cpu=1.0 + extra)
    rates = _rates(2400, level, seed)
    runs = []
    for cfg in (base, more):
        twin = TwinJob(PROFILE, cfg, seed=seed, failures="every:10m")
        twin.run(rates, emit=False)
        runs.append(twin.history()["lag"].to_numpy())
    assert (runs[1] <= runs[0] + 1e-6).all()


def test_latency_grows_without_bound_above_capacity() -> None:
    twin = TwinJob(PROFILE, SMALL, seed=1)
    cap = twin.steady_state(rate=1.0)["capacity"]
    twin.run(np.full(1200, 1.3 * cap), emit=False)
    h = twin.history()
    p95 = h["latency_p95_ms"].to_numpy().reshape(20, 60).mean(axis=1)
    assert (np.diff(p95) > 0).all() and p95[-1] > 20 * p95[0]
    assert h["lag"].iloc[-1] == pytest.approx(0.3 * cap * 1200, rel=0.1)


def test_eighteen_hours_run_within_budget() -> None:
    rates = _rates(18 * 3600, 50_000)
    twin = TwinJob(PROFILE, MAX, failures="every:45m")
    t0 = time.process_time()
    df = twin.run(rates)
    assert time.process_time() - t0 < 10.0
    assert len(df) == 18 * 3600 * 38 and twin.restarts == 23
