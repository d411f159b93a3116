"""The twin's restart cost fitted on measured reactive-mode rescales (flinktune.calibration.restart)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from flinktune.calibration.restart import (
    calibrate_restart,
    calibrate_restart_on_folder,
    find_reactive_measurements,
    read_reactive_measurements,
    rescale_episodes,
    twin_rescale_cost,
)
from flinktune.config_space import Configuration
from flinktune.twin import mechanics as mech
from flinktune.twin.profile import ClusterProfile
from flinktune.twin.simulator import TwinJob

SHAPE = Configuration(parallelism=8, task_slots=1, cpu=1.0, memory_mb=2048, checkpoint_interval_s=10)


def _rate(profile: ClusterProfile, tms: int, share: float) -> float:
    cfg = SHAPE.with_(parallelism=tms)
    return share * float(mech.capacity(mech.layout(profile, cfg), np.ones(1))[0])


def _episodes(truth: ClusterProfile, moves: list[tuple[int, int, float]]) -> pd.DataFrame:
    """Episodes whose measured cost is what a twin with ``truth``'s restart cost gives."""
    rows = []
    for a, b, share in moves:
        rate = _rate(truth, min(a, b), share)
        rows.append({"tm_before": a, "tm_after": b, "rate": rate, "cost_s2": twin_rescale_cost(truth, SHAPE, a, b, rate)})
    return pd.DataFrame(rows)


def test_a_known_warmup_and_pod_start_are_recovered() -> None:
    base = ClusterProfile.default("ysb")
    truth = base.with_(rescale_warmup_s=8.0, tm_start_s=15.0)
    eps = _episodes(truth, [(6, 5, 0.5), (8, 6, 0.4), (4, 6, 0.6), (5, 7, 0.5)])
    cal = calibrate_restart(base, SHAPE, eps)
    assert cal.fitted["rescale_warmup_s"] == pytest.approx(8.0, abs=1.0)
    assert cal.fitted["tm_start_s"] == pytest.approx(15.0, abs=1.5)
    assert "restart_per_tm_s" not in cal.fitted  # the warm-up did not reach its bound
    assert cal.profile.restart_per_tm_s == base.restart_per_tm_s
    assert cal.twin_cost_s2_before > cal.measured_cost_s2  # the default 20 s warm-up costs more
    assert cal.profile.warmup_s == base.warmup_s  # a fresh deployment's (and a failure's) warm-up stays


def test_the_per_taskmanager_restart_time_is_fitted_once_the_warmup_is_at_zero() -> None:
    base = ClusterProfile.default("ysb")
    truth = base.with_(rescale_warmup_s=0.0, restart_per_tm_s=0.1)
    eps = _episodes(truth, [(6, 5, 0.5), (8, 6, 0.4), (7, 4, 0.3)])
    cal = calibrate_restart(base, SHAPE, eps)
    assert cal.fitted["rescale_warmup_s"] == 0.0 and "lower bound" in cal.note
    assert cal.fitted["restart_per_tm_s"] == pytest.approx(0.1, abs=0.03)
    assert "no usable scale-up" in cal.note and cal.profile.tm_start_s == base.tm_start_s


def _minutes(tms: list[float], lat: list[float], start: int = 1_000_000) -> pd.DataFrame:
    n = len(tms)
    return pd.DataFrame(
        {"timestamp": start + 60 * np.arange(n), "latency": lat, "task_managers": tms, "throughput": np.full(n, 20_000.0)}
    )


def test_episodes_are_found_costed_and_failures_left_out() -> None:
    tms = [10, 10, 10, 9.5, 9, 9, 9, 9, 9, 8.7, 9, 9, 9, 10.5, 12, 12, 12]
    lat = [1000.0] * 17
    lat[3], lat[4], lat[5] = 3000.0, 1500.0, 1100.0  # the scale-down 10 -> 9 and the minute after it
    lat[9] = 5000.0  # 9 -> 8.7 -> 9: a TaskManager lost and back (no rescale between whole counts)
    lat[13], lat[14], lat[15] = 2000.0, 2000.0, 1000.0  # the scale-up 9 -> 12
    eps = rescale_episodes(_minutes(tms, lat))
    assert eps[["tm_before", "tm_after", "minutes"]].values.tolist() == [[10, 9, 2], [9, 12, 2]]
    # Excess over the quiet median (1000 ms) x 60 s: (2000 + 500 + 100) ms and (1000 + 1000) ms.
    assert eps["cost_s2"].tolist() == pytest.approx([156.0, 120.0])
    assert eps["rate"].tolist() == [20_000.0, 20_000.0]
    # An injected failure next to the scale-up: that episode is a recovery, not a rescale.
    near = rescale_episodes(_minutes(tms, lat), injections=[1_000_000 + 60 * 13 + 30])
    assert near["tm_after"].tolist() == [9]


def test_bad_input_gives_a_clear_error(tmp_path) -> None:
    with pytest.raises(ValueError, match=r"missing column\(s\) \['latency'\]"):
        rescale_episodes(_minutes([1, 2], [1.0, 1.0]).drop(columns=["latency"]))
    with pytest.raises(ValueError, match=r"episodes: missing column\(s\) \['cost_s2'\]"):
        calibrate_restart(ClusterProfile.default("ysb"), SHAPE, pd.DataFrame({"tm_before": [2], "tm_after": [1], "rate": [1.0]}))
    folder = tmp_path / "measured_60s"
    folder.mkdir()
    pd.DataFrame({"timestamp": [1], "latency": [1.0], "throughput": [1.0]}).to_csv(folder / "1_reactive35_X.csv", index=False)
    with pytest.raises(ValueError, match=r"1_reactive35_X.csv: missing column\(s\) \['task_managers'\]"):
        read_reactive_measurements(find_reactive_measurements(tmp_path))
    pd.DataFrame({"timestamp": [1], "latency": [np.nan], "task_managers": [2], "throughput": [1.0]}).to_csv(
        folder / "1_reactive35_X.csv", index=False
    )
    with pytest.raises(ValueError, match="no usable row"):
        read_reactive_measurements(find_reactive_measurements(tmp_path))


def test_without_measured_reactive_runs_the_profile_is_unchanged(tmp_path) -> None:
    base = ClusterProfile.default("ysb")
    cal = calibrate_restart_on_folder(tmp_path, base, SHAPE)
    assert cal.profile == base and cal.fitted == {} and "not calibrated" in cal.note
    # Episodes the twin cannot keep up with at the lower count say nothing about the restart.
    eps = pd.DataFrame({"tm_before": [3], "tm_after": [2], "rate": [_rate(base, 2, 1.5)], "cost_s2": [50.0]})
    cal = calibrate_restart(base, SHAPE, eps)
    assert cal.profile == base and cal.fitted == {} and "no usable scale-down" in cal.note


def test_the_rescale_warmup_applies_to_rescale_restarts_only() -> None:
    base = ClusterProfile.default("ysb")
    cold, warm = base, base.with_(rescale_warmup_s=0.0)
    rate = _rate(base, 5, 0.5)
    assert twin_rescale_cost(warm, SHAPE, 6, 5, rate) < twin_rescale_cost(cold, SHAPE, 6, 5, rate)

    def after_failure(profile: ClusterProfile) -> np.ndarray:
        job = TwinJob(profile, SHAPE.with_(parallelism=5), reactive=True)
        job.run(np.full(60, rate), emit=False)
        job.inject_failure()
        job.run(np.full(300, rate), emit=False)
        return job.history()["lag"].to_numpy(float)

    lag = after_failure(cold)
    assert lag.max() > 0 and np.array_equal(lag, after_failure(warm))  # a failure keeps warmup_s
