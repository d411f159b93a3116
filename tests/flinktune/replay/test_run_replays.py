"""Many replays on one pool (:func:`flinktune.replay.runner.run_replays`): keyed results, each the
same as that policy's replay alone, and ``run_replay`` answering through it."""

from __future__ import annotations

import io

from flinktune.config_space import default_space
from flinktune.replay import ReplaySettings, replay_policy
from flinktune.replay.runner import run_replay, run_replays
from flinktune.twin import ClusterProfile, generate_trace

TRACE = generate_trace("ysb", 0.5, 3)


def test_keyed_replays_equal_each_replay_alone_and_report_progress():
    jobs = {(seed, "static"): ("static", ReplaySettings(seed=seed), None) for seed in (3, 4)}
    jobs[(3, "reactive")] = ("reactive", ReplaySettings(seed=3), {"target_utilization": 0.5})
    bar = io.StringIO()
    runs = run_replays(TRACE, jobs, workers=1, progress=bar)
    assert list(runs) == list(jobs)  # ordered as asked, though Demeter-like policies would go first
    profile, space = ClusterProfile.default("ysb"), default_space()
    for (seed, name), run in runs.items():
        alone = replay_policy(name, TRACE, profile, space, ReplaySettings(seed=seed), policy_options=jobs[(seed, name)][2])
        assert run.policy == name and run.summary == alone.summary
    assert "3/3" in bar.getvalue() and "3 reactive" in bar.getvalue()
    # The seeds differ (their failures and noise), so the keys are not interchangeable.
    assert runs[(3, "static")].summary != runs[(4, "static")].summary


def test_run_replay_is_the_one_seed_case():
    runs = run_replay(TRACE, "ysb", ["reactive", "static"], ReplaySettings(seed=3), workers=1, progress=None)
    assert list(runs) == ["reactive", "static"]
    assert (
        runs["static"].summary
        == run_replays(TRACE, {"s": ("static", ReplaySettings(seed=3), None)}, workers=1, progress=None)["s"].summary
    )
