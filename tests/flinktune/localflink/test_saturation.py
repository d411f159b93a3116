"""Capacity near saturation, on recorded counter snapshots (no JVM is started).

``data/ramp_p1_p2_snapshots.csv`` is a real recording of ``ramp_to_saturation`` on the local
cluster (work=10000, keys=500; p=1 then p=2; the 2-core machine was shared, so Flink got
0.3-1.0 cores). Its ramps: p=1 kept up at 3k and 9k, fell behind at 26.7k (21.9k sustained),
kept up at 19.7k; p=2 kept up at 17.5k, fell behind at 52.4k, 41.7k and 37.6k, kept up at 34.7k.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from flinktune.localflink.saturation import SNAPSHOT_COLUMNS, estimate_capacity, next_step_rate, summarize_step

RECORDING = Path(__file__).parent / "data" / "ramp_p1_p2_snapshots.csv"


def recorded_steps(parallelism: int):
    df = pd.read_csv(RECORDING)
    df = df[df["parallelism"] == parallelism]
    return [summarize_step(g, float(g["target_rate"].iloc[0])) for _, g in df.groupby("step", sort=True)]


def test_recorded_ramps_are_classified_as_the_job_behaved():
    p1, p2 = recorded_steps(1), recorded_steps(2)
    assert [s.saturated for s in p1] == [False, False, True, False]
    assert [s.saturated for s in p2] == [False, True, True, True, False]
    for s in p1 + p2:
        if not s.saturated:  # a step that kept up sustained its target
            assert s.throughput == pytest.approx(s.target_rate, rel=0.05)
        else:
            assert s.throughput < 0.9 * s.target_rate and s.lag_growth > 0.05 * s.target_rate


def test_recorded_ramp_chooses_its_next_rates_from_the_steps_so_far():
    p1 = recorded_steps(1)
    for k in range(1, len(p1)):
        assert next_step_rate(p1[:k]) == pytest.approx(p1[k].target_rate, rel=1e-6)
    assert next_step_rate(p1) is None  # 19.7k kept up: at least 85 % of the 21.9k limit is confirmed
    p2 = recorded_steps(2)
    for k in range(1, 3):
        assert next_step_rate(p2[:k]) == pytest.approx(p2[k].target_rate, rel=1e-6)


def test_capacity_is_the_sustained_rate_and_the_busy_time_estimate_overshoots_at_low_load():
    p1 = estimate_capacity(1, recorded_steps(1))
    assert p1.trusted and p1.method == "saturation"
    assert p1.capacity == pytest.approx(recorded_steps(1)[2].throughput)
    p2 = estimate_capacity(2, recorded_steps(2))
    sat = [s.throughput for s in recorded_steps(2) if s.saturated]
    assert p2.capacity == pytest.approx(max(np.median(sat), p2.sustained_rate))
    assert p1.capacity < p2.capacity < 2 * p1.capacity
    # At p=2 the highest unsaturated step was 46 % busy: throughput / busy nearly doubles the real limit.
    assert p2.busy_overestimate > 0.5 and abs(p1.busy_overestimate) < 0.25


def _frame(rate: float, seconds: int = 15, pending_growth: float = 0.0, busy: float = 0.5, seed: int = 0, stale_s: float = 1.0):
    """Polls 1 s apart of a job sustaining ``rate``; each read is up to ``stale_s`` old (the REST cache)."""
    rng = np.random.default_rng(seed)
    t = 1000.0 + np.arange(seconds, dtype=float)
    seen = t - rng.uniform(0, stale_s, size=len(t))
    return pd.DataFrame(
        {
            "t_s": t,
            "records_out": rate * (seen - 900.0),
            "busy_ms": 1000 * busy * (seen - 900.0),
            "backpressured_ms": 0.0,
            "pending": np.maximum(pending_growth * (seen - 1000.0), 0.0),
        }
    )


def test_slopes_average_out_stale_reads_that_a_two_point_difference_does_not():
    worst_slope, worst_two_point = 0.0, 0.0
    for seed in range(20):
        f = _frame(20000.0, seed=seed)
        s = summarize_step(f, 20000.0)
        worst_slope = max(worst_slope, abs(s.throughput / 20000.0 - 1))
        two_point = (f["records_out"].iloc[-1] - f["records_out"].iloc[0]) / (f["t_s"].iloc[-1] - f["t_s"].iloc[0])
        worst_two_point = max(worst_two_point, abs(two_point / 20000.0 - 1))
        assert not s.saturated and s.busy == pytest.approx(0.5, rel=0.05)
    assert worst_slope < 0.03 < worst_two_point


def test_a_growing_backlog_alone_marks_saturation():
    s = summarize_step(_frame(20000.0, pending_growth=3000.0), 20000.0)
    assert s.saturated and "backlog" in s.reason


def test_bad_frames_are_refused_with_the_reason():
    good = _frame(1000.0)
    with pytest.raises(ValueError, match="lacks column"):
        summarize_step(good.drop(columns=["pending"]), 1000.0, where="step 3")
    with pytest.raises(ValueError, match="step 3: 2 polls"):
        summarize_step(good.head(2), 1000.0, where="step 3")
    restarted = good.copy()
    restarted.loc[8:, "records_out"] -= 1e6
    with pytest.raises(ValueError, match=r"records_out went backwards.*restarted"):
        summarize_step(restarted, 1000.0)
    with pytest.raises(ValueError, match="non-finite"):
        summarize_step(good.assign(busy_ms=np.nan), 1000.0)
    with pytest.raises(ValueError, match="target rate must be positive"):
        summarize_step(good, 0.0)
    assert set(SNAPSHOT_COLUMNS) <= set(good.columns)


def test_ramp_without_saturation_is_only_a_lower_bound_unless_near_busy():
    low = summarize_step(_frame(5000.0, busy=0.2), 5000.0)
    est = estimate_capacity(1, [low])
    assert not est.trusted and est.method == "lower bound" and est.capacity == pytest.approx(5000, rel=0.03)
    # the next step aims under the busy-time estimate (25k) but jumps at most 3x
    assert next_step_rate([low]) == pytest.approx(15000.0, rel=0.03)
    hot = summarize_step(_frame(9000.0, busy=0.93), 9000.0)
    assert next_step_rate([low, hot]) == pytest.approx(9000 * 1.25)
    near = estimate_capacity(1, [low, hot])
    assert near.trusted and near.method == "near saturation" and near.capacity == pytest.approx(9000, rel=0.03)
    with pytest.raises(ValueError, match="parallelism 3 has no profiling steps"):
        estimate_capacity(3, [])


def test_a_step_is_disturbed_only_when_a_neighbour_took_measurable_cpu():
    import dataclasses

    from flinktune.localflink.profiling import disturbed

    base = summarize_step(
        pd.DataFrame(
            {
                "t_s": np.arange(10.0),
                "records_out": np.arange(10.0) * 1000,
                "busy_ms": np.arange(10.0) * 500,
                "backpressured_ms": 0.0,
                "pending": 0.0,
            }
        ),
        1000.0,
    )
    assert not disturbed(base, 0.35)  # CPU not measured: nothing to say
    assert not disturbed(dataclasses.replace(base, machine_cores=1.2, flink_cores=1.0), 0.35)  # the driver's polling
    assert disturbed(dataclasses.replace(base, machine_cores=1.9, flink_cores=1.1), 0.35)
