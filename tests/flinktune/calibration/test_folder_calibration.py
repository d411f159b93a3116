"""The calibrations on measured methods beside a profiling table, in one sequence (flinktune.calibration.folder)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from flinktune.calibration.folder import calibrate_beside
from flinktune.calibration.grey_box import GreyBoxTwin
from flinktune.config_space import Configuration
from flinktune.twin import mechanics as mech
from flinktune.twin.profile import ClusterProfile

STATIC = Configuration(parallelism=24, task_slots=1, cpu=1.0, memory_mb=4096, checkpoint_interval_s=10)


def _twin(profile: ClusterProfile) -> GreyBoxTwin:
    # The learned part is not read by these calibrations: only the mechanism profile is.
    models = {"marker": object()}
    return GreyBoxTwin(profile, {"x": 1.0}, 100.0, 360.0, 180.0, 240, models)


def _static_minutes(truth: ClusterProfile, rows: int = 120) -> pd.DataFrame:
    thr = np.linspace(20_000, 60_000, rows)
    lay = mech.layout(truth, STATIC)
    gc = mech.gc_factor(truth, mech.memory_pressure(truth, lay, thr))
    load = mech.cpu_used(truth, lay, thr, gc) / STATIC.total_cpu
    return pd.DataFrame(
        {"timestamp": np.arange(rows) * 60, "cpu_load": load, "task_managers": 24, "throughput": thr, "latency": 500.0}
    )


def test_without_measured_methods_the_twin_is_unchanged_and_each_term_says_why(tmp_path) -> None:
    base = ClusterProfile.default("ysb")
    twin = _twin(base)
    cal = calibrate_beside(tmp_path, twin, pd.DataFrame(), base, STATIC)
    assert cal.twin.profile == base and cal.twin.models is twin.models
    assert set(cal.notes) == {"restart", "downtime", "redeploy", "cpu"}
    assert all("not calibrated" in note for note in cal.notes.values()), cal.notes


def test_a_measured_static_run_calibrates_cpu_and_keeps_the_learned_part(tmp_path) -> None:
    base = ClusterProfile.default("ysb")
    (tmp_path / "measured_60s").mkdir()
    _static_minutes(base.with_(cpu_per_busy=0.45)).to_csv(tmp_path / "measured_60s" / "1_baseline_ads.csv", index=False)
    twin = _twin(base)
    cal = calibrate_beside(tmp_path, twin, pd.DataFrame(), base, STATIC)
    assert cal.twin.profile.cpu_per_busy == pytest.approx(0.45, rel=1e-3)
    assert cal.twin.models is twin.models and cal.twin.params == twin.params
    assert "120 measured minutes" in cal.notes["cpu"], cal.notes["cpu"]
    assert "not calibrated" in cal.notes["restart"] and "not calibrated" in cal.notes["redeploy"]
    assert twin.profile == base  # the input is not changed in place


def test_an_unreadable_measured_file_is_named(tmp_path) -> None:
    base = ClusterProfile.default("ysb")
    (tmp_path / "measured_60s").mkdir()
    bad = tmp_path / "measured_60s" / "2_baseline_ads.csv"
    pd.DataFrame({"timestamp": [0], "cpu_load": [0.2]}).to_csv(bad, index=False)
    with pytest.raises(ValueError, match=r"2_baseline_ads\.csv"):
        calibrate_beside(tmp_path, _twin(base), pd.DataFrame(), base, STATIC)
