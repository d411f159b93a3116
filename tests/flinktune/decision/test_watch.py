"""The watch asks for a decision between intervals only when backlog grows on a job that runs normally."""

from __future__ import annotations

import numpy as np
import pytest

from flinktune.config_space import Configuration
from flinktune.decision.stages import DecisionRecord
from flinktune.decision.watch import WatchRule, check
from flinktune.twin import ClusterProfile, TwinJob

PROFILE = ClusterProfile.default("ysb")
BIG = Configuration(24, 1, 1.0, 4096, 10)
SMALL = Configuration(2, 1, 1.0, 4096, 10)
RATE = 20000.0
RULE = WatchRule()


def _last_window(config: Configuration, seconds: int, **twin_kw):
    twin = TwinJob(PROFILE, config, job="w", seed=3, **twin_kw)
    frames = [twin.run(np.full(seconds, RATE))]
    return frames[-1], twin


def test_no_alarm_while_the_job_keeps_up():
    samples, twin = _last_window(BIG, 300)
    assert check("w", samples, BIG, twin.now, last_decision_ts=None) is None


def test_an_alarm_when_the_backlog_outgrows_the_running_size_and_its_reason_has_the_numbers():
    samples, twin = _last_window(SMALL, 300)
    alarm = check("w", samples, SMALL, twin.now, last_decision_ts=twin.now - 600)
    assert alarm is not None
    assert alarm.backlog_growth > RULE.min_backlog_s * alarm.input_rate
    assert "backlog grew by" in alarm.reason and f"{alarm.input_rate:,.0f} rec/s input" in alarm.reason


def test_no_alarm_within_the_settling_time_of_a_change_but_a_keep_holds_it_only_one_watch_period():
    samples, twin = _last_window(SMALL, 300)
    assert check("w", samples, SMALL, twin.now, last_decision_ts=twin.now - RULE.settle_s + 1) is None  # a change, by default
    # a keep 90 s ago restarted nothing: the climb it did not see is answered now
    assert check("w", samples, SMALL, twin.now, last_decision_ts=twin.now - 90, last_changed=False) is not None
    assert check("w", samples, SMALL, twin.now, last_decision_ts=twin.now - 90, last_changed=True) is None
    assert check("w", samples, SMALL, twin.now, last_decision_ts=twin.now - RULE.every_s + 1, last_changed=False) is None


def test_a_failures_backlog_is_not_an_alarm():
    # A failure at 5 min: the job is down, then drains its backlog, which grows meanwhile by design.
    twin = TwinJob(PROFILE, BIG, job="w", seed=3, failures="every:5m")
    twin.run(np.full(300, RATE))
    samples = twin.run(np.full(40, RATE))
    assert samples.loc[samples.metric == "pendingRecords", "value"].max() > RULE.min_backlog_s * RATE
    assert check("w", samples, BIG, twin.now, last_decision_ts=None) is None


def test_bad_rules_are_refused():
    with pytest.raises(ValueError, match="watch rule"):
        WatchRule(every_s=0)


def test_on_a_cluster_the_watch_reads_what_runs_and_the_last_decision_from_the_store():
    from flinktune.decision import Decision
    from flinktune.decision.store import MemoryStateStore
    from flinktune.decision.watch import check_cluster
    from flinktune.twin.adapters import TwinMetricsSource, TwinRealizer

    twin = TwinJob(PROFILE, SMALL, job="w", seed=3, retain_s=600)
    twin.run(np.full(300, RATE))
    realizer, source, store = TwinRealizer(twin, job="w"), TwinMetricsSource(twin, job="w"), MemoryStateStore()
    alarm = check_cluster("w", realizer, source, store, twin.now, latency_target_ms=1000.0)
    assert alarm is not None and "over the 1,000 ms target" in alarm.reason  # the backlog is what users see already
    state = evaluate_window(twin)
    store.record_decision(DecisionRecord("w", twin.now, state, Decision.keep("test", "decided at this instant"), None))
    assert check_cluster("w", realizer, source, store, twin.now, latency_target_ms=1000.0) is None  # decided already
    twin.run(np.full(RULE.every_s - 30, RATE))
    assert check_cluster("w", realizer, source, store, twin.now, latency_target_ms=1000.0) is None  # the keep's minute
    twin.run(np.full(60, RATE))
    assert check_cluster("w", realizer, source, store, twin.now, latency_target_ms=1000.0) is not None


def evaluate_window(twin):
    from flinktune.decision.evaluation import evaluate

    return evaluate("w", twin.run(np.full(1, RATE)), SMALL, twin.now, window_s=60)
