"""Metric quality gates: each rule holds on the fault it names, and the decide job's loop holds with it."""

from __future__ import annotations

import pandas as pd
import pytest

from flinktune.config_space import Configuration, default_space
from flinktune.decision import Action
from flinktune.decision.evaluation import evaluate
from flinktune.decision.guard import SafetyGuard
from flinktune.decision.testing import raw_samples
from flinktune.metrics.quality import duplicate_problems, quality_problems, unit_problems
from flinktune.runs.decide_cluster import FROZEN_AFTER_S

SPACE = default_space()
BIG = SPACE.maximum  # 24 TaskManagers: 4 cores used and 2 GB of heap are well inside it


def moving(seconds: int = 600, start_s: int = 1000) -> pd.DataFrame:
    df = raw_samples("j", start_s, seconds, rate=30000, lag=500, p95=180)
    wiggle = (df["ts_ms"] // 1000 % 7).astype(float)  # live values move every second
    df.loc[df["metric"].isin(["workloadRate", "latencyP95Ms"]), "value"] += wiggle
    return df


def test_clean_moving_metrics_pass_every_gate():
    assert quality_problems(moving(), BIG, now=1600, max_staleness_s=120, frozen_after_s=FROZEN_AFTER_S) == []


def test_frozen_values_with_fresh_timestamps_hold():
    frozen = raw_samples("j", 1000, 600, rate=30000, lag=500, p95=180)  # every value constant, timestamps fresh
    problems = quality_problems(frozen, BIG, now=1600, max_staleness_s=120, frozen_after_s=FROZEN_AFTER_S)
    assert len(problems) == 1 and problems[0].startswith("frozen metrics") and "599 s" in problems[0]


def test_duplicates_and_overlapping_samples_hold():
    df = moving()
    twice = pd.concat([df, df[df["ts_ms"] < 1_300_000]], ignore_index=True)  # an overlapping raw file
    assert any(p.startswith("duplicate samples") and "workloadRate" in p for p in duplicate_problems(twice))
    shifted = df[df["metric"] == "workloadRate"].assign(ts_ms=lambda d: d["ts_ms"] + 100)  # a second scraper, 100 ms later
    assert [p for p in duplicate_problems(pd.concat([df, shifted], ignore_index=True)) if p.startswith("overlapping samples")]
    assert duplicate_problems(df) == []


def test_staleness_holds():
    assert any(
        p.startswith("stale data: newest sample is 1001 s old")
        for p in quality_problems(moving(start_s=0), BIG, now=1600, max_staleness_s=120)
    )


@pytest.mark.parametrize(
    "metric,value,config,needle",
    [
        ("cpuLoad", 55.0, Configuration(8, 4, 1.0, 1024, 30), "percent"),  # 2 cores reserved, 55 "cores"
        ("heapUsedMb", 2.1e9, BIG, "bytes"),  # heap in bytes
        ("latencyP95Ms", 0.18, BIG, "seconds"),  # latency in seconds
    ],
)
def test_units_out_of_range_for_the_configuration_in_force_hold(metric, value, config, needle):
    df = moving()
    df.loc[df["metric"] == metric, "value"] = value
    problems = unit_problems(df, config)
    assert len(problems) == 1 and metric in problems[0] and needle in problems[0]


def test_the_decide_loop_holds_with_the_gates_reason():
    """evaluate() (what DecisionLoop.step calls) carries the gate's reason; the guard turns it into a hold."""
    df = moving()
    df = pd.concat([df, df[df["metric"] == "workloadRate"]], ignore_index=True)  # rate counted twice
    state = evaluate("j", df, BIG, now=1600, window_s=600, frozen_after_s=FROZEN_AFTER_S)
    assert any(p.startswith("duplicate samples") for p in state.problems)
    from flinktune.decision import Decision

    planned = Decision(Action.RECONFIGURE, "scale down", "policy", target=Configuration(8, 4, 1.0, 1024, 30))
    decision = SafetyGuard(SPACE, 1000.0).review(planned, state, 1600)
    assert decision.action is Action.KEEP and "hold:" in decision.reason and "duplicate samples" in decision.reason


def test_the_frozen_gate_fires_at_the_default_window_and_limit():
    """The decide job's window is the decision interval (300 s by default) and its frozen limit
    FROZEN_AFTER_S (300 s): a window frozen from end to end spans less than the window, so the limit
    is capped at FROZEN_WINDOW_SHARE of it and a frozen window holds; a scale-down is refused."""
    from flinktune.decision import Decision
    from flinktune.settings import Settings

    window = Settings().decision_interval_s
    now = 1000 + window
    frozen = raw_samples("j", 1000, window, rate=30000, lag=500, p95=180)
    state = evaluate("j", frozen, BIG, now=now, window_s=window, frozen_after_s=FROZEN_AFTER_S)
    assert any(p.startswith("frozen metrics") for p in state.problems), state.problems
    planned = Decision(Action.RECONFIGURE, "scale down", "policy", target=Configuration(8, 4, 1.0, 1024, 30))
    decision = SafetyGuard(SPACE, 1000.0).review(planned, state, now)
    assert decision.action is Action.KEEP and "frozen metrics" in decision.reason
    # Metrics that move in the same window pass.
    live = moving(window)
    assert not any(
        p.startswith("frozen") for p in evaluate("j", live, BIG, now=now, window_s=window, frozen_after_s=FROZEN_AFTER_S).problems
    )


def test_metrics_that_disagree_with_the_clusters_configuration_hold_with_the_reason():
    """Metrics saying parallelism 16 while the cluster says 24: the change is held, the reason names both."""
    from flinktune.decision import Decision

    config = BIG  # the cluster's configuration in force
    reported = moving()
    reported = reported[reported["metric"] == "workloadRate"].assign(metric="configParallelism", value=16.0)
    df = pd.concat([moving(), reported], ignore_index=True)
    state = evaluate("j", df, config, now=1600, window_s=600, frozen_after_s=FROZEN_AFTER_S)
    reason = next(p for p in state.problems if p.startswith("metrics disagree"))
    assert f"configParallelism reports 16 but the cluster's configuration has parallelism {config.parallelism}" in reason
    planned = Decision(Action.RECONFIGURE, "scale down", "policy", target=Configuration(8, 4, 1.0, 1024, 30))
    decision = SafetyGuard(SPACE, 1000.0).review(planned, state, 1600)
    assert decision.action is Action.KEEP and "metrics disagree" in decision.reason
    agreeing = pd.concat([moving(), reported.assign(value=float(config.parallelism))], ignore_index=True)
    assert not any(p.startswith("metrics disagree") for p in evaluate("j", agreeing, config, now=1600, window_s=600).problems)
