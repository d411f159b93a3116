"""A decision reads the lake's history with the minutes after the lake's newest sample read live, checked
as the ingest's rows are; when the live part is out of reach or fails a check, it decides on the lake
alone and its reason says so, with the age of the data it used."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd

from flinktune.clock import ManualClock
from flinktune.config_space import Configuration, default_space
from flinktune.decision.backend import Backend
from flinktune.decision.fresh import FreshMetricsSource
from flinktune.decision.loop import LoopSettings, StepOutcome, build_decision_loop
from flinktune.decision.store import SqliteStateStore
from flinktune.decision.testing import FrameMetricsSource, FrameRecentMetrics, RecordingRealizer, raw_samples
from flinktune.policies import make_policy

CONFIG = Configuration(2, 1, 1.0, 2048, 10)
SPACE = default_space()
NOW = 1_800_000_000.0  # epoch s: the raw contract refuses timestamps before 2000


def _samples(start_s: int, seconds: int, rate: float) -> pd.DataFrame:
    """``raw_samples`` with the records-in rows the raw contract requires of a batch."""
    frame = raw_samples("j", start_s, seconds, rate=rate)
    rin = frame[frame["metric"] == "numRecordsOutPerSecond"].assign(metric="numRecordsInPerSecond")
    return pd.concat([frame, rin], ignore_index=True).astype({"job": "string", "metric": "string", "vertex": "string",
                                                             "subtask": "int32", "ts_ms": "int64"})  # fmt: skip


def _source(lake_until_s: int, recent: FrameRecentMetrics) -> FreshMetricsSource:
    """The lake holds [NOW - 600, lake_until_s) at 1,000 rec/s; ``recent`` whatever it was given."""
    lake = _samples(int(NOW) - 600, lake_until_s - (int(NOW) - 600), rate=1000.0)
    return FreshMetricsSource(FrameMetricsSource(lake), recent, ManualClock(NOW))


def test_the_minutes_after_the_lakes_newest_sample_come_from_the_recent_source_and_merge_in_order():
    live = FrameRecentMetrics(_samples(int(NOW) - 600, 600, rate=5000.0))  # the source has the whole window
    src = _source(int(NOW) - 240, live)  # the lake lags four minutes
    got = src.fetch("j", int(NOW - 300) * 1000, int(NOW * 1000) + 1)
    newest_lake_ms = (int(NOW) - 241) * 1000
    assert live.asked == [(newest_lake_ms + 1, int(NOW * 1000) + 1)]  # only what the lake does not hold
    assert src.note is None and src.served == {"lake": 60 * 11, "recent": 240 * 11}
    ts = got["ts_ms"].to_numpy()
    assert (np.diff(ts) >= 0).all() and not got.duplicated(["metric", "vertex", "subtask", "ts_ms"]).any()
    rate = got[got["metric"] == "workloadRate"].set_index("ts_ms")["value"]
    assert (rate[rate.index <= newest_lake_ms] == 1000.0).all() and (rate[rate.index > newest_lake_ms] == 5000.0).all()
    assert int(ts.max()) == (int(NOW) - 1) * 1000


def test_a_lake_that_holds_the_whole_window_asks_nothing():
    live = FrameRecentMetrics(_samples(int(NOW) - 600, 600, rate=5000.0))
    src = _source(int(NOW) + 1, live)
    got = src.fetch("j", int(NOW - 300) * 1000, int(NOW * 1000) + 1)
    assert live.asked == [] and src.note is None and len(got) == 301 * 11


def _decide(source: FreshMetricsSource, tmp_path) -> tuple[dict, str, StepOutcome]:
    store = SqliteStateStore(tmp_path / "s.db")
    loop = build_decision_loop(Backend("test", source, RecordingRealizer(CONFIG), ManualClock(NOW)), LoopSettings("j", 3000.0, window_s=300),
                               policy=make_policy("ds2", SPACE), space=SPACE, store=store)  # fmt: skip
    outcome = loop.step()
    row = store.decisions("j").iloc[-1]
    return json.loads(row["state"]), str(row["reason"]), outcome


def test_the_decision_records_the_age_of_the_merged_views_newest_sample(tmp_path):
    src = _source(int(NOW) - 240, FrameRecentMetrics(_samples(int(NOW) - 600, 600, rate=1000.0)))
    state, reason, outcome = _decide(src, tmp_path)
    assert state["data_age_s"] == 1.0 and outcome.state.fresh
    assert "lake alone" not in reason and "stale data" not in reason


def test_an_unreachable_source_is_a_decision_on_the_lake_alone_that_says_so_with_the_data_age(tmp_path):
    down = FrameRecentMetrics(
        _samples(int(NOW) - 600, 600, rate=1000.0), down="connection refused", name="Prometheus http://p:9090"
    )
    src = _source(int(NOW) - 240, down)
    state, reason, outcome = _decide(src, tmp_path)
    assert state["data_age_s"] == 241.0 and not outcome.state.fresh
    assert reason.startswith("hold: stale data: newest sample is 241 s old"), reason  # the guard's gate, as before
    assert reason.endswith("[Prometheus http://p:9090 unreachable (connection refused): decided on the lake alone, "
                           "newest sample 241 s old]"), reason  # fmt: skip
    assert outcome.decision.inputs["metrics_note"] in reason


def test_recent_rows_that_fail_the_raw_contract_never_reach_the_decision(tmp_path):
    bad = _samples(int(NOW) - 600, 600, rate=5000.0)
    bad.loc[(bad["metric"] == "latencyP95Ms") & (bad["ts_ms"] == (int(NOW) - 10) * 1000), "value"] = -5.0  # below the range
    src = _source(int(NOW) - 240, FrameRecentMetrics(bad))
    got = src.fetch("j", int(NOW - 300) * 1000, int(NOW * 1000) + 1)
    assert int(got["ts_ms"].max()) == (int(NOW) - 241) * 1000 and (got["value"] >= 0).all()
    assert "fail the raw_metrics contract" in src.note and "value" in src.note and "decided on the lake alone" in src.note


def test_rows_of_an_unknown_metric_or_outside_the_asked_range_are_refused_by_name():
    odd = _samples(int(NOW) - 600, 600, rate=5000.0)
    odd.loc[odd.index[-1], "metric"] = "madeUpRate"
    src = _source(int(NOW) - 240, FrameRecentMetrics(odd))
    src.fetch("j", int(NOW - 300) * 1000, int(NOW * 1000) + 1)
    assert (
        "unknown metric name(s) ['madeUpRate']" in src.note and "decided on the lake alone, newest sample 241 s old" in src.note
    )

    class Leaky(FrameRecentMetrics):
        def recent(self, job, start_ms, end_ms):
            return self.frame  # ignores the range: rows the lake holds already would count twice

    src = _source(int(NOW) - 240, Leaky(_samples(int(NOW) - 600, 600, rate=5000.0)))
    got = src.fetch("j", int(NOW - 300) * 1000, int(NOW * 1000) + 1)
    assert "rows outside job 'j'" in src.note and not got.duplicated(["metric", "vertex", "subtask", "ts_ms"]).any()


def test_no_recent_samples_is_said_and_an_empty_lake_with_an_unreachable_source_has_no_age():
    src = _source(int(NOW) - 240, FrameRecentMetrics(_samples(0, 10, rate=1.0)))  # nothing in the asked range
    src.fetch("j", int(NOW - 300) * 1000, int(NOW * 1000) + 1)
    assert "has no samples of job 'j'" in src.note
    empty = FreshMetricsSource(FrameMetricsSource(_samples(0, 10, rate=1.0)), FrameRecentMetrics(_samples(0, 1, 1.0), down="timed out"),
                               ManualClock(NOW))  # fmt: skip
    assert empty.fetch("j", int(NOW - 300) * 1000, int(NOW * 1000) + 1).empty
    assert empty.note == "the recent source unreachable (timed out): decided on the lake alone, no sample in the window"
