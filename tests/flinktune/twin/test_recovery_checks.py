"""Demeter's profiler's recovery checks: what they read off a lag series, and that on the real ADS
profiling runs the twin's profiles read that way land in the measured recovery class more often
than the drained measure."""

from __future__ import annotations

import os
from importlib import resources
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from flinktune.config_space import Configuration, default_space
from flinktune.replay.harness import _profiling_fields
from flinktune.replay.models import ReplayModels, make_forecaster
from flinktune.twin.profile import ClusterProfile
from flinktune.twin.profiling import profile_run, recovery_time
from flinktune.twin.recovery_checks import DEMETER_CHECKS, RecoveryChecks, checked_recovery_time, on_schedule

DATA = Path(
    os.environ.get("FLINKTUNE_DEMETER_ADS", Path(__file__).resolve().parents[3].parent / "shared" / "data" / "demeter-ads")
)
ADS = ClusterProfile.from_yaml(Path(str(resources.files("flinktune") / "resources" / "cluster_profile_ads.yaml")))
KNOBS = ["parallelism", "task_slots", "cpu", "memory_mb", "checkpoint_interval_s"]
RATE = 1000.0
FAIL = 60


def _lag(rise_s: int, fall_per_s: float, n: int = 600) -> np.ndarray:
    """A lag series: flat before the fault at FAIL, rising at RATE for ``rise_s`` seconds, then
    falling by ``fall_per_s`` a second to zero."""
    lag = np.zeros(n)
    for i in range(FAIL + 1, n):
        k = i - FAIL
        lag[i] = RATE * k if k <= rise_s else max(lag[i - 1] - fall_per_s, 0.0)
    return lag


def test_a_shrinking_backlog_is_recovered_at_the_first_check_before_it_drains() -> None:
    lag = _lag(rise_s=40, fall_per_s=0.2 * RATE)  # 40 s of input drained at a fifth of the rate: 240 s
    assert checked_recovery_time(lag, FAIL, RATE) == DEMETER_CHECKS.first_check_s
    assert recovery_time(lag, FAIL, RATE) > 200


def test_a_backlog_still_growing_at_a_check_waits_for_the_next_one() -> None:
    lag = _lag(rise_s=100, fall_per_s=0.5 * RATE)
    unbounded = RecoveryChecks(backlog_s=float("inf"))  # the growth rule alone
    assert checked_recovery_time(lag, FAIL, RATE, unbounded) == DEMETER_CHECKS.first_check_s + DEMETER_CHECKS.check_every_s


def test_a_shrinking_backlog_still_over_the_ceiling_waits_until_it_is_under() -> None:
    # 100 s of input drained at a tenth of the rate: shrinking at every check, but over 60 s of input
    # (the default ceiling) until 400 s after the rise; the check at 367 s is past the cap, so never.
    lag = _lag(rise_s=100, fall_per_s=0.1 * RATE)
    assert checked_recovery_time(lag, FAIL, RATE) == DEMETER_CHECKS.cap_s
    # A faster drain crosses the ceiling between two checks and is recovered at the next one.
    lag = _lag(rise_s=100, fall_per_s=0.5 * RATE)  # 60 s of input left 180 s after the fault
    c = DEMETER_CHECKS
    expected = next(t for t in range(c.first_check_s, int(c.cap_s), c.check_every_s) if t >= 180)
    assert checked_recovery_time(lag, FAIL, RATE) == expected
    # Without a ceiling the same drain reads recovered once it stops growing.
    assert checked_recovery_time(lag, FAIL, RATE, RecoveryChecks(backlog_s=float("inf"))) == c.first_check_s + c.check_every_s


def test_the_ceiling_counts_from_the_pre_failure_level() -> None:
    lag = _lag(rise_s=100, fall_per_s=0.5 * RATE)
    behind = lag + 50 * RATE  # the same fault in a job that ran 50 s behind before it
    assert checked_recovery_time(behind, FAIL, RATE) == checked_recovery_time(lag, FAIL, RATE) > DEMETER_CHECKS.first_check_s


def test_a_job_that_stays_behind_never_recovers() -> None:
    lag = _lag(rise_s=10_000, fall_per_s=0.0)
    assert checked_recovery_time(lag, FAIL, RATE) == DEMETER_CHECKS.cap_s
    assert checked_recovery_time(lag[: FAIL + 50], FAIL, RATE) == DEMETER_CHECKS.cap_s  # series too short


def test_bad_schedules_and_measures_are_named() -> None:
    with pytest.raises(ValueError, match="first_check_s must lie in"):
        RecoveryChecks(first_check_s=400)
    with pytest.raises(ValueError, match="backlog_s must be > 0 s of input, got 0"):
        RecoveryChecks(backlog_s=0)
    with pytest.raises(ValueError, match="window_s and check_every_s"):
        RecoveryChecks(check_every_s=0)
    with pytest.raises(ValueError, match=r"unknown recovery measure 'fast'; known: drained, demeter"):
        profile_run(ADS, default_space().maximum, 20_000.0, recovery_measure="fast")


def test_demeter_replays_profile_with_its_checks() -> None:
    assert _profiling_fields("demeter", 180.0)["recovery_measure"] == "demeter"
    assert "recovery_measure" not in _profiling_fields("flinktune", 180.0)
    near = Configuration(parallelism=8, task_slots=4, cpu=3.0, memory_mb=1024, checkpoint_interval_s=30)  # measured: 120 s
    recovered = {}
    for measure in ("drained", "demeter"):
        models = ReplayModels(
            ADS, default_space(), make_forecaster("naive", horizon_s=600, seed=1), seed=1, recovery_measure=measure
        )
        # Three runs: the surrogate refit after a round needs three distinct points.
        others = [default_space().maximum, near.with_(parallelism=24)]
        recovered[measure] = float(models.profile([near, *others], 27_000.0)["recovery_s"].iloc[0])
    assert recovered["demeter"] in (DEMETER_CHECKS.first_check_s, DEMETER_CHECKS.first_check_s + DEMETER_CHECKS.check_every_s)
    assert recovered["drained"] > recovered["demeter"] + 30


def test_checks_match_the_measured_recovery_class_better_on_real_runs() -> None:
    if not (DATA / "profiling_runs.csv").exists():
        pytest.skip(f"real profiling runs not found at {DATA}")
    runs = pd.read_csv(DATA / "profiling_runs.csv").dropna(subset=["recovery_s"]).reset_index(drop=True)
    measured_ok = runs["recovery_s"].to_numpy() <= 180
    right = {}
    for measure in ("drained", "demeter"):
        twin = np.array(
            [
                profile_run(
                    ADS,
                    Configuration.from_dict({k: row[k] for k in KNOBS}),
                    float(row["input_rate"]),
                    duration_s=240,
                    seed=i,
                    recovery_measure=measure,
                )["recovery_s"]
                for i, row in runs.iterrows()
            ],
            dtype=float,
        )
        right[measure] = float(np.mean((twin <= 180) == measured_ok))
    assert right["demeter"] >= 0.83, right
    assert right["demeter"] >= right["drained"] + 0.05, right


def test_on_schedule_counts_recoveries_near_a_check_time() -> None:
    c = DEMETER_CHECKS
    rec = np.array([c.first_check_s + 2, c.first_check_s + c.check_every_s - 5, c.first_check_s + 15, 360.0, np.nan])
    assert on_schedule(rec) == (2, 3)  # the cap and the unmeasured run are left out
    assert on_schedule(np.array([360.0])) == (0, 0)
