"""flinktune's start-up profiling in the replay: a small one-core-per-slot design, charged like Demeter's."""

import pytest

from flinktune.config_space import default_space
from flinktune.replay import ReplaySettings, replay_policy
from flinktune.replay.harness import FLINKTUNE_STARTUP_RUNS
from flinktune.replay.models import ReplayModels, make_forecaster
from flinktune.tuner.shapes import startup_design
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


@pytest.mark.parametrize("policy", ["flinktune", "demeter"])
def test_profiling_runs_last_the_policys_own_run_length(policy, monkeypatch):
    import flinktune.replay.models as replay_models
    from flinktune.replay.harness import PROFILE_RUNS

    seen: list[int] = []
    real = replay_models.profile_configs

    def recording(*args, duration_s, **kwargs):
        seen.append(duration_s)
        return real(*args, duration_s=duration_s, **kwargs)

    monkeypatch.setattr(replay_models, "profile_configs", recording)
    trace = generate_trace("ysb", 0.25, 5)
    summary = replay_policy(policy, trace, ClusterProfile.default("ysb"), SPACE, ReplaySettings(seed=5)).summary
    assert seen and set(seen) == {PROFILE_RUNS[policy]["profile_duration_s"]}
    # Demeter's published run: 300 s, a recovery wait up to its 360 s cap (twice the 180 s limit), read at its checks.
    assert PROFILE_RUNS["demeter"] == {"profile_duration_s": 300, "recovery_wait_limits": 2.0, "recovery_measure": "demeter"}
    assert summary["profiling_runs"] >= len(seen)


def _models(**fields) -> ReplayModels:
    return ReplayModels(ClusterProfile.default("ysb"), SPACE, make_forecaster("naive", horizon_s=600, seed=1), seed=1,
                        profile_duration_s=60, **fields)  # fmt: skip


def test_a_run_that_falls_behind_skips_its_failure_and_long_recoveries_are_censored():
    from flinktune.config_space import Configuration
    from flinktune.twin.mechanics import RECOVERY_CAP_S
    from flinktune.twin.profiling import STABLE_S

    # p8 configurations far below 150k rec/s: they fall behind and never recover (three: the surrogate's minimum)
    small = [Configuration(8, 1, 1.0, 4096, 90), Configuration(8, 1, 1.0, 2048, 90), Configuration(8, 2, 2.0, 4096, 90)]
    cores = sum(c.total_cpu for c in small)
    full, lean = _models(), _models(recovery_wait_s=360.0, skip_failure_when_behind=True)
    full.profile(small, 150_000.0)
    lean.profile(small, 150_000.0)
    obs = full.observations
    assert (obs["throughput"] < 0.97 * obs["input_rate"]).all() and (obs["recovery_s"] == RECOVERY_CAP_S).all()
    # waited out in full: the cap and the stable check are charged; skipped: only the measurement
    assert full.cpu_core_s == pytest.approx(cores * (60 + RECOVERY_CAP_S + STABLE_S))
    assert lean.cpu_core_s == pytest.approx(cores * 60)
    assert (lean.observations["recovery_s"] == 360.0).all()  # still recorded as not recovering in time
    # runs that keep up but recover slower than the wait are stopped there and recorded at it
    slow = _models(recovery_wait_s=5.0)
    slow.profile(small, 5_000.0)
    o = slow.observations
    assert (o["throughput"] >= 0.97 * o["input_rate"]).all() and (o["recovery_s"] == 5.0).all()
    assert slow.cpu_core_s == pytest.approx(cores * 65)
