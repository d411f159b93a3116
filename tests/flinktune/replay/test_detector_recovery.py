"""The detector-like recovery measure (Demeter's anomaly detector) beside the twin's own one."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from flinktune.replay.metrics import DETECTOR, DetectorSettings, detector_recovery_time, recoveries
from flinktune.twin.profiling import recovery_time

RATE = 1000.0


def _lag(back_after_s: int, n: int = 900, fail: int = 100) -> np.ndarray:
    """Lag 0 before the fault at ``fail``, high until ``back_after_s`` seconds after it, then 0."""
    lag = np.zeros(n)
    lag[fail : fail + back_after_s] = 50_000.0
    return lag


def test_a_job_back_at_once_reads_the_detector_floor() -> None:
    # 20 s wait, then 15 points of 5 s: 95 s, the measured static median (minimum 93 s).
    assert detector_recovery_time(_lag(0), 100, RATE) == pytest.approx(95.0)
    assert DETECTOR.wait_s + DETECTOR.points * DETECTOR.point_s == 95


def test_the_detector_counts_normal_points_after_the_lag_is_back() -> None:
    lag = _lag(60)
    twin = recovery_time(lag, 100, RATE)
    det = detector_recovery_time(lag, 100, RATE)
    assert twin == pytest.approx(60.0, abs=1.0)
    # Normal from second 60 after the fault: the point starting at 60 s is the first normal one.
    assert det == pytest.approx(60 + 75.0)
    assert det > twin


def test_never_back_reads_the_cap_and_settings_apply() -> None:
    assert detector_recovery_time(_lag(800), 100, RATE) == DETECTOR.cap_s
    assert detector_recovery_time(_lag(0, n=150), 100, RATE) == DETECTOR.cap_s  # too few seconds left
    quick = DetectorSettings(wait_s=0, point_s=1, points=10, cap_s=100.0)
    assert detector_recovery_time(_lag(0), 100, RATE, quick) == pytest.approx(10.0)


def test_recoveries_of_a_history_give_both_measures() -> None:
    lag = _lag(30)
    restarts = np.zeros(len(lag))
    restarts[100:] = 1
    hist = pd.DataFrame({"ts": np.arange(len(lag)), "lag": lag, "rate": RATE, "restarts": restarts})
    rec = recoveries(hist)
    assert list(rec.columns) == ["ts", "recovery_s", "detector_recovery_s"]
    assert len(rec) == 1 and rec["ts"].iloc[0] == 100
    assert rec["detector_recovery_s"].iloc[0] == pytest.approx(30 + 75.0)
    assert rec["recovery_s"].iloc[0] < rec["detector_recovery_s"].iloc[0]
