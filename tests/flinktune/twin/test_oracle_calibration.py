"""The oracle schedule and profile calibration (round trip from a known profile)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from flinktune.calibration.mechanism import CalibrationError, apply_params, calibrate, evaluate
from flinktune.config_space import ConfigSpace
from flinktune.metrics.schema import PROFILING_COLUMNS
from flinktune.twin import mechanics as mech
from flinktune.twin.oracle import ORACLE_COLUMNS, oracle_schedule
from flinktune.twin.profile import ClusterProfile
from flinktune.twin.profiling import profile_configs
from flinktune.twin.workload import generate_trace

PROFILE = ClusterProfile.default()
SPACE = ConfigSpace()


def test_oracle_picks_the_cheapest_feasible_config_per_interval() -> None:
    trace = generate_trace("ysb", 3, seed=7)
    target = 1.5 * float(mech.steady_state(PROFILE, SPACE.maximum, 50_000)["latency_ms"][0])
    df = oracle_schedule(PROFILE, trace, SPACE, target, 180.0, interval_s=1800)
    assert list(df.columns) == list(ORACLE_COLUMNS) and len(df) == 6
    assert (df["peak_rate"].to_numpy() == trace.groupby(np.arange(len(trace)) // 1800).max().to_numpy()).all()
    cands = SPACE.candidates()
    for row in df[df["feasible"]].itertuples():
        assert row.latency_ms <= target and row.recovery_s <= 180
        cheaper = cands[: cands.index(row.config)]
        ss = [mech.steady_state(PROFILE, c, row.peak_rate) for c in cheaper]
        assert not any(s["latency_ms"][0] <= target and s["recovery_s"][0] <= 180 for s in ss)
    assert df["total_cpu"].mean() < SPACE.maximum.total_cpu  # there is something to win


def test_oracle_falls_back_to_the_maximum_when_nothing_fits() -> None:
    trace = pd.Series(500_000.0, index=pd.date_range("2024-01-01", periods=1200, freq="1s", tz="UTC"))
    df = oracle_schedule(PROFILE, trace, SPACE, 100.0, 180.0)
    assert (~df["feasible"]).all() and (df["config"] == SPACE.maximum).all()
    with pytest.raises(ValueError, match="empty trace"):
        oracle_schedule(PROFILE, trace.iloc[:0], SPACE, 100.0, 180.0)


def test_calibration_round_trip_recovers_a_known_profile() -> None:
    truth_params = {"cost_scale": 1.2, "extra_core_efficiency": 0.55, "queue_ms": 70.0, "base_latency_ms": 55.0,
                    "failure_detection_s": 28.0, "gc_slowdown": 2.2}  # fmt: skip
    truth = apply_params(PROFILE, truth_params)
    rng = np.random.default_rng(5)
    # A realistic design: configurations that fit in memory (unstable ones are too noisy to fit on).
    stable = [
        c for c in SPACE.candidates() if mech.memory_pressure(truth, mech.layout(truth, c), 90_000)[0] < truth.oom_pressure_start
    ]
    configs = [stable[i] for i in rng.choice(len(stable), 24, replace=False)]
    obs = profile_configs(truth, configs, [15_000, 40_000, 70_000], duration_s=180, seed=3)
    for col in ("throughput", "latency_ms", "recovery_s", "cpu_used"):
        obs[col] *= 1 + rng.normal(0, 0.03, len(obs))
    before = evaluate(PROFILE, obs, duration_s=180)
    res = calibrate(obs, PROFILE, seed=0, duration_s=180)
    for name, value in truth_params.items():
        assert res.params[name] == pytest.approx(value, rel=0.10), name
    assert res.holdout["throughput_mape"] <= 0.10 and res.holdout["recovery_mape"] <= 0.10
    assert res.holdout["latency_class_accuracy"] >= 0.9 and res.n_holdout == 18
    assert res.train["throughput_mape"] < before["throughput_mape"]
    assert "held-out (18 runs)" in res.summary()
    assert res.profile.dataflow.vertices[0].cost_us == pytest.approx(
        PROFILE.dataflow.vertices[0].cost_us * res.params["cost_scale"]
    )


def test_calibration_errors_name_the_problem() -> None:
    obs = pd.DataFrame({c: [1.0] * 4 for c in PROFILING_COLUMNS})
    with pytest.raises(CalibrationError, match=r"missing column\(s\) \['recovery_s'\]"):
        calibrate(obs.drop(columns=["recovery_s"]), PROFILE)
    bad = obs.copy()
    bad.loc[2, "latency_ms"] = -5.0
    with pytest.raises(CalibrationError, match="column 'latency_ms' row 2"):
        calibrate(bad, PROFILE)
    with pytest.raises(CalibrationError, match=r"\['warp_factor'\]"):
        calibrate(obs, PROFILE, params=["warp_factor"])


def test_failure_runs_without_a_latency_are_fitted_on_recovery_only() -> None:
    # A failure injection measures recovery but no steady latency (benchmarks/localflink/recovery.py).
    truth = apply_params(PROFILE, {"failure_detection_s": 8.0})
    configs = SPACE.candidates()[-60::10]  # large enough to recover from a failure at these rates
    obs = profile_configs(truth, configs, [10_000, 20_000], duration_s=180, seed=3)
    assert (obs["recovery_s"] < 180).all()
    failures = obs.copy()
    failures["latency_ms"] = np.nan
    steady = obs.assign(recovery_s=np.nan)
    both = pd.concat([steady, failures], ignore_index=True)
    res = calibrate(both, PROFILE, params=["failure_detection_s"], holdout=0.0, duration_s=180)
    # The same residuals as runs that carry both measurements: the split rows lose nothing.
    whole = calibrate(obs, PROFILE, params=["failure_detection_s"], holdout=0.0, duration_s=180)
    assert res.params["failure_detection_s"] == pytest.approx(whole.params["failure_detection_s"], rel=1e-3)
    assert abs(res.params["failure_detection_s"] - 8.0) < abs(PROFILE.failure_detection_s - 8.0) / 2  # moved towards the truth
    scores = evaluate(res.profile, both, duration_s=180)
    assert scores["recovery_mape"] < 0.1 and scores["latency_class_accuracy"] == 1.0
    assert np.isnan(evaluate(res.profile, failures, duration_s=180)["latency_class_accuracy"])  # nothing to score
    bad = both.copy()
    bad["latency_ms"] = bad["latency_ms"].astype(object)
    bad.loc[0, "latency_ms"] = "fast"
    with pytest.raises(CalibrationError, match="column 'latency_ms' row 0"):
        calibrate(bad, PROFILE)
