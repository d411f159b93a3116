"""The local decision loop's parts that need no cluster: profiled capacity, the profiling gate,
the rate plan, the hiding of profiling samples and the verdicts on reconfigurations."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from flinktune.config_space import ConfigSpace, Configuration
from flinktune.decision import Action, JobState, VertexMetrics
from flinktune.decision.stages import PolicyContext
from flinktune.localflink.audit import Change, judge_changes, smallest_sufficient
from flinktune.localflink.capacity import CapacitySurrogate, ProfiledCapacity
from flinktune.localflink.profiler import ProfileWhenUntrusted, WithoutProfiling
from flinktune.localflink.saturation import CapacityEstimate
from flinktune.localflink.workload import RatePlan
from flinktune.policies.static import StaticPolicy
from flinktune.tuner.capacity import ShapeCapacities, shape_of
from flinktune.tuner.flinktune_policy import FlinktunePolicy
from models.forecasting.types import QuantileForecast

SPACE = ConfigSpace(parallelism=(1, 2), task_slots=(1,), cpu=(1.0,), memory_mb=(1024,), checkpoint_interval_s=(10,))
P1 = Configuration(1, 1, 1.0, 1024, 10)
P2 = P1.with_(parallelism=2)


def est(p: int, capacity: float, trusted: bool = True, shape_memory: int = 1024) -> CapacityEstimate:
    return CapacityEstimate(
        p,
        capacity,
        trusted,
        "saturation" if trusted else "lower bound",
        capacity,
        capacity,
        2 * capacity,
        400.0,
        3,
        P1.with_(parallelism=p, memory_mb=shape_memory).to_dict(),
    )


def state(config: Configuration, rate: float, window_busy: float = 0.5) -> JobState:
    # DS2-style vertices: the window vertex's busy time gives the policy its own capacity measurement.
    vertices = (
        VertexMetrics("Source: PacedSource", config.parallelism, rate, rate, 0.03, 0.0, rate / 0.03),
        VertexMetrics("WindowAgg", config.parallelism, rate, rate / 100, window_busy, 0.0, rate / window_busy),
    )
    return JobState("j", 10_000.0, config, True, rate, rate, 0.0, 0.0, 400.0, 0.5, 100.0, window_busy, 0.0, 90, vertices=vertices)


def context(rate: float, surrogate=None) -> PolicyContext:
    flat = np.full(10, rate)
    fc = QuantileForecast(
        start=pd.Timestamp(10_000, unit="s", tz="UTC"), bin_s=30, mean=flat, quantiles={0.5: flat, 0.9: flat}, model="flat"
    )
    return PolicyContext(3000.0, 180.0, forecast=fc, surrogate=surrogate, profiled_max_rate=40000.0)


# -- profiled capacity -----------------------------------------------------------------------------
def test_profiled_capacity_caps_the_busy_time_measurement_and_keeps_across_reset():
    cap = ProfiledCapacity()
    cap.record(est(2, 40000.0))
    cap.record(est(1, 50000.0, trusted=False))  # a lower bound is not kept
    assert cap.trusted(2) and not cap.trusted(1)
    cap.observe(2, 68000.0)  # busy-time extrapolation at low load: over-predicts
    assert cap.estimate(2) == 40000.0
    cap.observe(2, 20000.0)  # a neighbour took a core: the window measurements fall (smoothed 0.5)
    assert cap.estimate(2) == 40000.0  # (68k + 20k) / 2 = 44k is still above the profiled limit
    cap.observe(2, 20000.0)
    assert cap.estimate(2) == pytest.approx(32000.0)  # now below it: the model follows down
    assert cap.estimate(1) == pytest.approx(cap.estimate(2) / 2)  # scale-down extrapolation is linear
    cap.reset()
    assert cap.estimate(2) == 40000.0 and not cap.measured
    with pytest.raises(ValueError, match="one ProfiledCapacity per shape"):
        cap.record(est(1, 20000.0, shape_memory=2048))


def test_capacity_surrogate_from_trusted_estimates_only():
    sur = CapacitySurrogate.from_estimates(
        SPACE, [est(1, 20000.0), est(2, 35000.0)], recovery_s=10.0, cpu_core_s_per_record=3e-5, memory_used_mb=100.0
    )
    assert sur.capacity == {1: 20000.0, 2: 35000.0} and sur.base_latency_ms[1] == 400.0
    with pytest.raises(ValueError, match="parallelism 2"):
        CapacitySurrogate.from_estimates(
            SPACE,
            [est(1, 20000.0), est(2, 35000.0, trusted=False)],
            recovery_s=10.0,
            cpu_core_s_per_record=3e-5,
            memory_used_mb=100.0,
        )


# -- the gate ------------------------------------------------------------------------------------------
def test_gate_profiles_the_current_size_and_its_neighbours_first():
    cap = ProfiledCapacity()
    gate = ProfileWhenUntrusted(StaticPolicy(SPACE), cap, SPACE)
    d = gate.decide(state(P1, 5000.0), context(5000.0))
    assert d.action is Action.PROFILE and [c.parallelism for c in d.profile_configs] == [1, 2]
    assert "p=[1, 2]" in d.reason and d.inputs["planned_rate"] == 5000.0 and d.policy == "static"
    cap.record(est(1, 20000.0))
    cap.record(est(2, 35000.0))
    d = gate.decide(state(P1, 5000.0), context(5000.0))
    assert d.action is Action.RECONFIGURE and d.target == P2  # trusted: the inner policy decides


def test_gate_turns_a_move_to_an_unprofiled_size_into_profiling_it():
    space = ConfigSpace(parallelism=(1, 2, 4), task_slots=(1,), cpu=(1.0,), memory_mb=(1024,), checkpoint_interval_s=(10,))
    cap = ProfiledCapacity()
    cap.record(est(1, 20000.0))
    cap.record(est(2, 35000.0))
    gate = ProfileWhenUntrusted(StaticPolicy(space), cap, space)  # static moves straight to p=4
    d = gate.decide(state(P1, 5000.0), context(5000.0))
    assert d.action is Action.PROFILE and d.profile_configs == (P1.with_(parallelism=4),)
    assert "p=4 has no trustworthy capacity" in d.reason


def test_flinktune_policy_scales_up_on_the_profiled_capacity_not_the_busy_time_one():
    # The window vertex is 2/3 busy at 20k rec/s: busy time says p=1 carries 30k; profiling said 21.9k.
    sur = CapacitySurrogate.from_estimates(
        SPACE, [est(1, 21900.0), est(2, 38500.0)], recovery_s=10.0, cpu_core_s_per_record=3e-5, memory_used_mb=100.0
    )
    cap = ProfiledCapacity()
    cap.record(est(1, 21900.0))
    cap.record(est(2, 38500.0))
    policy = FlinktunePolicy(SPACE, capacities=ShapeCapacities(models={shape_of(P1): cap}), min_down_step=1)
    gated = ProfileWhenUntrusted(policy, cap, SPACE)
    d = gated.decide(state(P1, 20000.0, window_busy=2 / 3), context(20000.0, sur))
    assert d.action is Action.RECONFIGURE and d.target == P2, d.reason
    assert cap.measured == {1: pytest.approx(30000.0)}  # the policy did measure 30k; the profiled 21.9k capped it
    busy_only = FlinktunePolicy(SPACE, min_down_step=1)
    d = busy_only.decide(state(P1, 20000.0, window_busy=2 / 3), context(20000.0, sur))
    assert d.action is Action.KEEP  # what the busy-time measurement alone would have done: fall behind


# -- rate plan ------------------------------------------------------------------------------------------
def test_rate_plan_requires_a_scale_up_that_the_larger_size_carries():
    plan = RatePlan.from_capacities({1: 20000.0, 2: 35000.0}, 900.0)
    assert plan.low == pytest.approx(8000) and plan.high == pytest.approx(26000)  # min(1.3 x 20k, 0.8 x 35k)
    rates = [plan.rate_at(t) for t in np.arange(0, 901, 5)]
    assert max(rates) == pytest.approx(plan.high) and rates[0] == rates[-1] == pytest.approx(plan.low)
    assert plan.high > 20000 and plan.high <= 0.8 * 35000
    peak_at = [t for t, r in zip(np.arange(0, 901, 5), rates) if r == pytest.approx(plan.high)]
    assert 0 < peak_at[0] < peak_at[-1] < 900 - 0.33 * 900  # the last third stays low: room for a scale-down
    assert RatePlan.from_capacities({1: 20000.0, 2: 60000.0}, 900.0).high == pytest.approx(26000)
    with pytest.raises(ValueError, match="not enough above p=1"):
        RatePlan.from_capacities({1: 20000.0, 2: 26000.0}, 900.0)
    with pytest.raises(ValueError, match="increasing times"):
        RatePlan(((0.0, 1.0), (0.0, 2.0)), 1.0, 2.0)


# -- hiding profiling samples ---------------------------------------------------------------------------
class _Recorded:
    def __init__(self, df: pd.DataFrame) -> None:
        self.df = df

    def fetch(self, job: str, start_ms: int, end_ms: int) -> pd.DataFrame:
        d = self.df
        return d[(d["job"] == job) & (d["ts_ms"] >= start_ms) & (d["ts_ms"] < end_ms)].reset_index(drop=True)


def raw(ts_s: np.ndarray, metric: str, values) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "job": "j",
            "metric": metric,
            "vertex": "",
            "subtask": -1,
            "ts_ms": (ts_s * 1000).astype("int64"),
            "value": np.broadcast_to(np.asarray(values, dtype=float), ts_s.shape),
        }
    )


def test_samples_taken_while_profiling_are_hidden_with_a_margin():
    t = np.arange(0, 400, 2.0)
    periods: list[tuple[float, float]] = []
    view = WithoutProfiling(_Recorded(raw(t, "workloadRate", 1.0)), periods, margin_s=60)
    assert len(view.fetch("j", 0, 10**9)) == len(t)
    periods.append((100.0, 200.0))  # the profiler appends; the view follows
    kept = view.fetch("j", 0, 10**9)["ts_ms"] / 1000
    assert ((kept < 100) | (kept >= 260)).all() and len(kept) == 50 + 70


# -- verdicts --------------------------------------------------------------------------------------------
CAP = {1: 20000.0, 2: 35000.0}


def run(rate_fn, latency_fn, end: float = 700.0) -> pd.DataFrame:
    t = np.arange(0, end, 2.0)
    return pd.concat([raw(t, "workloadRate", [rate_fn(x) for x in t]), raw(t, "latencyP95Ms", [latency_fn(x) for x in t])])


def test_a_needed_scale_up_and_a_safe_scale_down_are_correct():
    samples = run(lambda t: 26000.0 if 120 <= t < 380 else 8000.0, lambda t: 400.0)
    changes = [Change(60.0, 1, 2, "in-place rescale", 0.4), Change(450.0, 2, 1, "in-place rescale", 0.5)]
    up, down = judge_changes(samples, changes, CAP, 3000.0, end_ts=700.0)
    assert up.correct and up.smallest_sufficient_p == 2 and up.peak_rate == 26000.0 and up.change.kind == "scale-up"
    assert down.correct and down.smallest_sufficient_p == 1 and down.change.downtime_s == 0.5
    assert up.to_dict()["change"]["kind"] == "scale-up"


def test_needless_capacity_missed_latency_and_short_windows_are_not_correct():
    # p=2 while the rate never left what p=1 carries: needless; p=1 afterwards misses the target.
    samples = run(lambda t: 12000.0 if t < 450 else 25000.0, lambda t: 400.0 if t < 450 else 9000.0)
    changes = [Change(60.0, 1, 2), Change(450.0, 2, 1), Change(680.0, 1, 2)]
    up, down, late = judge_changes(samples, changes, CAP, 3000.0, end_ts=700.0)
    assert up.needless and up.latency_ok and up.correct is False and "more than needed" in up.why
    assert down.latency_ok is False and down.correct is False and down.over_target_fraction > 0.9
    assert late.correct is None and "not judged" in late.why
    assert smallest_sufficient(40000.0, CAP, 0.85) is None
    with pytest.raises(ValueError, match="no measured capacity for parallelism \\[4\\]"):
        judge_changes(samples, [Change(60.0, 2, 4)], CAP, 3000.0, end_ts=700.0)
    with pytest.raises(ValueError, match="lack \\['latencyP95Ms'\\]"):
        judge_changes(samples[samples["metric"] == "workloadRate"], changes, CAP, 3000.0, end_ts=700.0)


def test_frozen_rest_metrics_are_a_problem_only_when_they_really_froze():
    """Recorded REST samples: 90 s from a run whose JobManager stopped refreshing its metrics after a
    TaskManager kill (fresh timestamps, identical values), and 90 s of a healthy steady plateau."""
    from flinktune.config_space import Configuration
    from flinktune.decision.evaluation import evaluate

    rec = pd.read_csv(Path(__file__).parent / "data" / "rest_metrics_frozen_and_healthy.csv.gz")
    cfg = Configuration(1, 1, 1.0, 1024, 10)
    for window, frozen in (("frozen", True), ("healthy", False)):
        df = rec[rec["window"] == window].drop(columns="window")
        now = df["ts_ms"].max() / 1000.0 + 1
        state = evaluate("loop-bench", df, cfg, now, window_s=90, max_staleness_s=30, frozen_after_s=60)
        assert any(p.startswith("frozen metrics") for p in state.problems) is frozen, (window, state.problems)
        # Without the check (the default) the frozen window reads as fit to act on: what the loop did.
        assert not any(p.startswith("frozen metrics") for p in evaluate("loop-bench", df, cfg, now, window_s=90).problems)
