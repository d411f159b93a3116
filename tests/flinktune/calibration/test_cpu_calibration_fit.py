"""The twin's CPU per record calibrated on a measured static run's CPU load (flinktune.calibration.cpu)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from flinktune.calibration.cpu import calibrate_cpu, find_static_measurements, read_static_measurements
from flinktune.config_space import Configuration
from flinktune.twin import mechanics as mech
from flinktune.twin.profile import ClusterProfile

STATIC = Configuration(parallelism=24, task_slots=1, cpu=1.0, memory_mb=4096, checkpoint_interval_s=10)


def _measured(profile: ClusterProfile, config: Configuration, throughputs: np.ndarray) -> pd.DataFrame:
    """Per-minute rows as a real job whose CPU is ``profile``'s would report them."""
    lay = mech.layout(profile, config)
    gc = mech.gc_factor(profile, mech.memory_pressure(profile, lay, throughputs))
    load = mech.cpu_used(profile, lay, throughputs, gc) / config.total_cpu
    return pd.DataFrame({"cpu_load": load, "task_managers": config.taskmanagers, "throughput": throughputs})


def test_calibrated_cpu_matches_a_synthetic_measured_load() -> None:
    base = ClusterProfile.default("ysb")
    thr = np.linspace(20_000, 60_000, 200)
    measured = _measured(base.with_(cpu_per_busy=0.45), STATIC, thr)
    cal = calibrate_cpu(base, STATIC, measured)
    assert cal.cpu_per_busy == pytest.approx(0.45, rel=1e-3)
    # The twin's CPU load at the measured throughputs now equals the measured one, on average.
    lay = mech.layout(cal.profile, STATIC)
    gc = mech.gc_factor(cal.profile, mech.memory_pressure(cal.profile, lay, thr))
    twin_load = mech.cpu_used(cal.profile, lay, thr, gc).mean() / STATIC.total_cpu
    assert twin_load == pytest.approx(measured["cpu_load"].mean(), rel=1e-3)
    assert cal.twin_cpu_load_before > cal.measured_cpu_load  # the uncalibrated twin was busier
    # Capacity (and so throughput and busy time) is not touched.
    assert mech.layout(cal.profile, STATIC).base_capacity == pytest.approx(mech.layout(base, STATIC).base_capacity)


def test_no_minute_at_the_static_size_leaves_the_profile_unchanged() -> None:
    base = ClusterProfile.default("ysb")
    other = pd.DataFrame({"cpu_load": [0.3], "task_managers": [12], "throughput": [10_000.0]})
    cal = calibrate_cpu(base, STATIC, other)
    assert cal.profile == base and cal.cpu_per_busy is None and "not calibrated" in cal.note


def test_measured_files_are_found_and_checked(tmp_path) -> None:
    assert find_static_measurements(tmp_path) == []
    folder = tmp_path / "measured_60s"
    folder.mkdir()
    good = pd.DataFrame(
        {"timestamp": [1, 2, 3], "cpu_load": [0.2, np.nan, 1.5], "task_managers": [24, 24, 24], "throughput": [1e4, 1e4, 1e4]}
    )
    good.to_csv(folder / "1_baseline_X.csv", index=False)
    pd.DataFrame({"cpu_load": [0.5]}).to_csv(folder / "1_reactive35_X.csv", index=False)  # not a static run
    files = find_static_measurements(tmp_path)
    assert [f.name for f in files] == ["1_baseline_X.csv"]
    rows = read_static_measurements(files)
    assert len(rows) == 1  # NaN and a load above 1 are dropped
    pd.DataFrame({"cpu_load": [0.5]}).to_csv(folder / "2_baseline_X.csv", index=False)
    with pytest.raises(ValueError, match="missing column"):
        read_static_measurements(find_static_measurements(tmp_path))


def test_the_default_profile_keeps_cpu_equal_to_busy_work() -> None:
    prof = ClusterProfile.default("ysb")
    assert prof.cpu_per_busy == 1.0
    lay = mech.layout(prof, STATIC)
    thr, gc = np.array([30_000.0]), np.array([1.0])
    assert mech.cpu_used(prof, lay, thr, gc)[0] == pytest.approx(
        mech.busy_cores(lay, thr, gc)[0] + prof.idle_cores_per_tm * STATIC.taskmanagers
    )
