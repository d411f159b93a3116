"""A model policy's replay started with a carried profile database: loaded, not charged, no start-up design."""

import pandas as pd
import pytest

from flinktune.config_space import default_space
from flinktune.replay import ReplaySettings, replay_policy
from flinktune.replay.harness import prepare_replay
from flinktune.replay.models import PRIOR_COLUMNS, ReplayModels, make_forecaster
from flinktune.twin import ClusterProfile, generate_trace

SPACE = default_space()
PROFILE = ClusterProfile.default("ysb")


@pytest.fixture(scope="module")
def first_run():
    trace = generate_trace("ysb", 0.5, 5)
    return trace, replay_policy("demeter", trace, PROFILE, SPACE, ReplaySettings(seed=5))


def test_the_second_run_starts_with_the_first_runs_rows_and_is_not_charged_for_them(first_run):
    trace, first = first_run
    assert first.prior_profiles == 0
    assert first.observations is not None and len(first.observations) == first.summary["profiling_runs"] >= 16
    # The second run's models hold the first run's rows before it decides anything, charged nothing.
    rig = prepare_replay("demeter", trace, PROFILE, SPACE, ReplaySettings(seed=5), prior_observations=first.observations)
    assert rig.models is not None and rig.models.surrogate is not None
    assert rig.models.runs == 0 and rig.models.cpu_core_s == 0.0 and rig.models.memory_mb_s == 0.0
    pd.testing.assert_frame_equal(rig.models.observations, first.observations.reset_index(drop=True))
    second = replay_policy("demeter", trace, PROFILE, SPACE, ReplaySettings(seed=5), prior_observations=first.observations)
    assert second.prior_profiles == len(first.observations)
    # Its database: the carried rows first, then its own runs, and only its own runs are counted and charged.
    own = len(second.observations) - second.prior_profiles
    assert own == second.summary["profiling_runs"] < first.summary["profiling_runs"]  # no start-up design again
    pd.testing.assert_frame_equal(
        second.observations.iloc[: second.prior_profiles].reset_index(drop=True), first.observations.reset_index(drop=True)
    )
    per_run_cpu = first.summary["profiling_cpu_core_hours"] / first.summary["profiling_runs"]
    assert second.summary["profiling_cpu_core_hours"] < per_run_cpu * (own + 1)


def test_a_bad_prior_table_is_named(first_run):
    _, first = first_run
    models = ReplayModels(PROFILE, SPACE, make_forecaster("naive", horizon_s=600, seed=1), seed=1)
    with pytest.raises(ValueError, match="'latency_ms'"):
        models.carry(first.observations.drop(columns=["latency_ms"]))
    broken = first.observations.copy()
    broken.loc[0, "recovery_s"] = float("nan")
    with pytest.raises(ValueError, match=r"'recovery_s'.*1 missing"):
        models.carry(broken)
    with pytest.raises(ValueError, match="no rows"):
        models.carry(first.observations.iloc[:0])
    assert models.observations is None and models.prior_rows == 0  # nothing half-loaded
    models.carry(first.observations[list(PRIOR_COLUMNS)])  # the needed columns are enough
    assert models.prior_rows == len(first.observations)
    with pytest.raises(ValueError, match="already hold"):
        models.carry(first.observations)


def test_only_profiling_policies_take_priors(first_run):
    trace, first = first_run
    with pytest.raises(ValueError, match="replay static: prior observations"):
        prepare_replay("static", trace, PROFILE, SPACE, ReplaySettings(seed=5), prior_observations=first.observations)
