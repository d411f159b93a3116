"""flinktune's start-up profiling in the replay: a small one-core-per-slot design, charged like Demeter's."""

import pytest

from flinktune.config_space import default_space
from flinktune.policies.shapes import startup_design
from flinktune.replay import ReplaySettings, replay_policy
from flinktune.replay.harness import FLINKTUNE_STARTUP_RUNS
from flinktune.replay.models import ReplayModels, make_forecaster
from flinktune.twin import ClusterProfile, generate_trace

SPACE = default_space()


def test_bootstrap_profiles_the_given_design_at_each_rate_and_charges_it():
    models = ReplayModels(ClusterProfile.default("ysb"), SPACE, make_forecaster("naive", horizon_s=600, seed=1), seed=1,
                          profile_duration_s=60)  # fmt: skip
    design = startup_design(SPACE, 3, seed=1)
    models.bootstrap([10000.0, 20000.0], design=design)
    assert models.runs == 6 and len(models.observations) == 6
    assert models.surrogate is not None and models.profiled_max_rate == pytest.approx(20000.0, rel=0.05)
    # each run is charged at least its configuration's CPU for the measured seconds
    assert models.cpu_core_s >= 2 * sum(c.total_cpu for c in design) * 60
    with pytest.raises(ValueError, match="design is empty"):
        models.bootstrap([10000.0], design=[])


def test_flinktune_replay_profiles_its_small_design_only():
    trace = generate_trace("ysb", 0.5, 5)
    ft = replay_policy("flinktune", trace, ClusterProfile.default("ysb"), SPACE, ReplaySettings(seed=5)).summary
    assert ft["profiling_runs"] == 2 * FLINKTUNE_STARTUP_RUNS < 16
    assert 0 < ft["profiling_cpu_core_hours"] < ft["cpu_core_hours"]
