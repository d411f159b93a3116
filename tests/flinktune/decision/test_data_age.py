"""Every decision records how old its data was: the age of the newest sample it used."""

from __future__ import annotations

import json
import math

from flinktune.config_space import Configuration
from flinktune.decision import Decision
from flinktune.decision.evaluation import evaluate
from flinktune.decision.stages import DecisionRecord
from flinktune.decision.store import SqliteStateStore
from flinktune.decision.testing import raw_samples

CONFIG = Configuration(12, 1, 1.0, 2048, 10)


def test_the_state_carries_the_age_of_its_newest_sample_and_the_store_keeps_it(tmp_path):
    frame = raw_samples("j", 1000, 300, rate=1000.0)  # samples at 1000 .. 1299 s
    state = evaluate("j", frame, CONFIG, 1299.0 + 42.5, window_s=300, max_staleness_s=120)
    assert state.data_age_s == 42.5 and state.fresh
    stale = evaluate("j", frame, CONFIG, 1299.0 + 600, window_s=300, max_staleness_s=120)
    assert stale.data_age_s == 600.0 and not stale.fresh
    assert math.isnan(evaluate("j", frame.iloc[0:0], CONFIG, 2000.0, window_s=300).data_age_s)
    store = SqliteStateStore(tmp_path / "s.db")
    store.record_decision(DecisionRecord("j", state.ts, state, Decision.keep("p", "fine"), None))
    assert json.loads(store.decisions("j")["state"].iloc[-1])["data_age_s"] == 42.5
