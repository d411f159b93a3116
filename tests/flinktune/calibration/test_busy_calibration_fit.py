"""The busy time the operator autoscaler reads, fitted on the measured operator's decisions."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from flinktune.calibration.busy import (
    OperatorDecision,
    calibrate_busy_on_folder,
    calibrate_busy_time,
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


def _synthetic(factor: float, n: int = 60, seed: int = 0) -> list[OperatorDecision]:
    """Decisions the 1.6 operator would make if its busy time were the twin's x ``factor``."""
    rng = np.random.default_rng(seed)
    out = []
    while len(out) < n:
        p0 = int(rng.integers(4, 25))
        rate = float(rng.uniform(10000.0, 90000.0))
        d = OperatorDecision(p0, p0, rate, float(rng.uniform(0.0, 20000.0)), 0.0)
        p1 = predicted_parallelism(POLICY, d, factor * twin_busy(PROFILE, MAX, p0, rate), MAX.parallelism)
        if p1 != p0:
            out.append(OperatorDecision(p0, p1, d.rate, d.lag, d.growth))
    return out


@pytest.mark.parametrize("factor", [0.45, 0.7, 1.2])
def test_recovers_a_known_factor_from_synthetic_decisions(factor):
    cal = calibrate_busy_time(PROFILE, MAX, POLICY, _synthetic(factor))
    assert cal.busy_time_scale == pytest.approx(factor, rel=0.06)
    assert cal.exact >= 0.9 * cal.decisions and "busy_time_scale" in cal.note


def test_decisions_are_read_from_the_task_manager_counts():
    tm = [24, 24, 24, 17.4, 12, 12, 12, 11.2, 12, 12, 12, 12, 20, 20]
    df = pd.DataFrame({"task_managers": tm, "throughput": np.arange(len(tm)) * 1000.0 + 20000.0, "consumer_lag": 600.0})
    got = operator_decisions(df)
    # 24 -> 12 across a partial minute; the dip to 11.2 comes back to 12 (a failure): not a decision.
    assert [(d.p_from, d.p_to) for d in got] == [(24, 12), (12, 20)]
    assert got[0].rate == pytest.approx(21500.0) and got[0].lag == 600.0 and got[0].growth == 0.0
    assert operator_decisions(df, max_gap=0) == [got[1]]  # the partial minute separates the first pair


def test_clear_errors_and_notes_on_bad_or_missing_input(tmp_path):
    with pytest.raises(ValueError, match="consumer_lag"):
        operator_decisions(pd.DataFrame({"task_managers": [24], "throughput": [1.0]}))
    with pytest.raises(ValueError, match="grid"):
        calibrate_busy_time(PROFILE, MAX, POLICY, _synthetic(0.7, n=10), grid=np.array([0.0, 1.0]))
    few = calibrate_busy_time(PROFILE, MAX, POLICY, _synthetic(0.7, n=3))
    assert few.busy_time_scale is None and "not calibrated" in few.note
    none = calibrate_busy_on_folder(tmp_path, PROFILE, MAX, POLICY)
    assert none.busy_time_scale is None and "no measured_60s/*operator*.csv" in none.note
    (tmp_path / "measured_60s").mkdir()
    pd.DataFrame({"task_managers": [24], "throughput": [1.0]}).to_csv(tmp_path / "measured_60s" / "1_operator35_X.csv")
    with pytest.raises(ValueError, match=r"1_operator35_X\.csv"):
        calibrate_busy_on_folder(tmp_path, PROFILE, MAX, POLICY)
