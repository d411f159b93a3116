"""The measured lag read in the operator's unit (its sum over the source partitions) by the busy-time fit."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from flinktune.calibration.busy import (
    OperatorDecision,
    calibrate_busy_noise_on_folder,
    calibrate_busy_on_folder,
    measured_lag_scale,
    operator_decisions,
    predicted_parallelism,
    twin_busy,
)
from flinktune.config_space import default_space
from flinktune.policies.autoscaler import AutoscalerPolicy
from flinktune.twin import ClusterProfile

SPACE = default_space()
MAX = SPACE.maximum
PROFILE = ClusterProfile.default("ysb")
POLICY = AutoscalerPolicy.published("demeter-1.6", SPACE)
PARTITIONS = 24


def _measured_run(factor: float, partitions: int, steps: int = 40, seed: int = 1) -> pd.DataFrame:
    """A per-minute operator run whose rescales the 1.6 operator made from the busy time = the twin's x
    ``factor`` and a lag ``partitions`` x the one recorded (as demeter-ads records one partition's)."""
    rng = np.random.default_rng(seed)
    rows: list[tuple[float, float, float]] = []
    p = 24
    while steps:
        rate, lag = float(rng.uniform(15000.0, 60000.0)), float(rng.uniform(0.0, 300000.0))
        d = OperatorDecision(p, p, rate, lag * partitions, 0.0)
        p1 = predicted_parallelism(POLICY, d, factor * twin_busy(PROFILE, MAX, p, rate), MAX.parallelism)
        if p1 == p:
            continue
        rows += [(p, rate, lag)] * 3 + [((p + p1) / 2.0, rate, lag)]  # a stretch, then the redeploy's partial minute
        p, steps = p1, steps - 1
    rows += [(p, 30000.0, 0.0)] * 3
    return pd.DataFrame(rows, columns=["task_managers", "throughput", "consumer_lag"])


def test_lag_and_its_growth_are_scaled_and_nothing_else():
    tm = [24, 24, 24, 17.4, 12, 12, 12]
    df = pd.DataFrame({"task_managers": tm, "throughput": 20000.0, "consumer_lag": [0, 0, 1200, 0, 0, 0, 0]})
    one, many = operator_decisions(df), operator_decisions(df, lag_scale=24.0)
    assert [(d.p_from, d.p_to, d.rate) for d in one] == [(d.p_from, d.p_to, d.rate) for d in many] == [(24, 12, 20000.0)]
    assert (one[0].lag, one[0].growth) == (1200.0, 20.0)
    assert (many[0].lag, many[0].growth) == (24 * 1200.0, 24 * 20.0)
    with pytest.raises(ValueError, match="lag_scale"):
        operator_decisions(df, lag_scale=0.0)


def test_the_factor_defaults_to_the_largest_parallelism_and_can_be_given():
    assert measured_lag_scale(MAX) == float(MAX.parallelism)
    assert measured_lag_scale(MAX, 6) == 6.0
    with pytest.raises(ValueError, match="partitions"):
        measured_lag_scale(MAX, 0)


def test_the_fit_in_the_operators_unit_recovers_decisions_the_raw_lag_does_not(tmp_path):
    (tmp_path / "measured_60s").mkdir()
    _measured_run(0.9, PARTITIONS).to_csv(tmp_path / "measured_60s" / "1_operator35_ADS.csv", index=False)
    right = calibrate_busy_on_folder(tmp_path, PROFILE, MAX, POLICY)  # the default: x the largest parallelism, 24
    raw = calibrate_busy_on_folder(tmp_path, PROFILE, MAX, POLICY, partitions=1)
    assert right.decisions == raw.decisions == 40
    assert right.busy_time_scale == pytest.approx(0.9, rel=0.06) and right.exact >= 36
    assert raw.exact < right.exact - 5  # the lag 24x too small misses decisions the catch-up term made
    assert "x 24" in right.note and "x 1 " in raw.note
    # The spread fitted in the right unit is (near) none; in the raw one it absorbs the misfit.
    grid_note = calibrate_busy_noise_on_folder(tmp_path, PROFILE, MAX, POLICY, right.busy_time_scale or 1.0)
    assert grid_note.busy_time_noise is not None and grid_note.busy_time_noise <= 0.1
