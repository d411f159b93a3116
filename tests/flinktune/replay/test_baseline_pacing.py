"""The replay runs each published baseline under its own pacing and reconfiguration mode: no
flinktune guard cooldowns for them, Demeter's 60 s check of its 10-minute clock, and Flink's
reactive mode under the reactive + HPA baseline."""

from __future__ import annotations

from flinktune.config_space import default_space
from flinktune.decision.guard import GuardRules
from flinktune.replay.harness import DECISION_INTERVAL_S, ReplaySettings, guard_rules_for, prepare_replay
from flinktune.twin import ClusterProfile
from flinktune.twin.workload import generate_trace

SPACE = default_space()


def test_published_baselines_run_without_flinktunes_cooldowns_and_rollback():
    rules = GuardRules(quota_cpu=40.0)
    for name in ("demeter", "autoscaler", "reactive"):
        own = guard_rules_for(name, rules)
        assert own.stabilization_s == own.scale_down_window_s == own.rollback_window_s == 0.0
        assert own.quota_cpu == 40.0  # bounds and quotas stay
    assert guard_rules_for("flinktune", rules) == rules


def test_demeter_checks_its_clock_every_minute():
    assert DECISION_INTERVAL_S["demeter"] == 60


def test_the_reactive_baseline_runs_its_twin_in_reactive_mode():
    trace = generate_trace("ysb", 0.1, 3)
    prof, settings = ClusterProfile.default("ysb"), ReplaySettings(seed=3)
    assert prepare_replay("reactive", trace, prof, SPACE, settings).twin.reactive
    assert not prepare_replay("static", trace, prof, SPACE, settings).twin.reactive
    assert not prepare_replay("autoscaler", trace, prof, SPACE, settings).twin.reactive
