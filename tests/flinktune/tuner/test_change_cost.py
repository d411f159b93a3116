"""The price of a change: the catch-up model, learning a job's downtime and warm-up, durable memory."""

from __future__ import annotations

import json
import math

from flinktune.tuner.change_cost import ChangeCosts, Episode, ModeCost, catch_up


def test_catch_up_costs_more_with_a_longer_warm_up_and_a_busier_target():
    quick, _ = catch_up(25_000, 0, 39_000, 1.2, 50, 0)
    slow, slow_settle = catch_up(25_000, 0, 39_000, 1.2, 50, 600)
    roomy, _ = catch_up(25_000, 0, 80_000, 1.2, 50, 600)
    assert quick[0] < slow[0]
    assert roomy[0] < slow[0]
    assert slow_settle[0] >= slow[0]
    # The downtime itself is always over target.
    assert quick[0] >= 50


def test_a_configuration_that_cannot_carry_the_rate_never_catches_up():
    over, settle = catch_up(50_000, 0, 40_000, 1.2, 10, 0)
    assert math.isinf(over[0]) and math.isinf(settle[0])


def test_refit_moves_from_the_prior_to_what_the_job_showed():
    # A job whose redeploys warm up for 600 s: the episode it showed is what catch_up predicts for it.
    truth_over, truth_settle = catch_up(25_000, 0, 39_000, 1.2, 60, 600)
    mode = ModeCost(20.0, 30.0)
    before = catch_up(25_000, 0, 39_000, 1.2, mode.downtime_s, mode.warmup_s)[0][0]
    mode.episodes = [Episode(25_000, 0, 39_000, 1.2, float(truth_over[0]), float(truth_settle[0]))]
    mode.refit()
    after = catch_up(25_000, 0, 39_000, 1.2, mode.downtime_s, mode.warmup_s)[0][0]
    assert abs(after - truth_over[0]) < abs(before - truth_over[0])
    assert abs(after - truth_over[0]) <= 0.5 * truth_over[0]


def test_a_watched_change_becomes_an_episode_once_the_job_is_calm_and_survives_json():
    costs = ChangeCosts()
    costs.started(1000.0, "redeploy", 20_000, 0.0, 1.0)
    # Minutes 1020-1440 over target, then calm.
    minutes = tuple((float(t), 9_000.0 if t < 1440 else 800.0) for t in range(960, 1800, 60))
    assert costs.observe(1500.0, minutes[:10], 2_000, 30_000) is None  # not calm long enough yet
    episode = costs.observe(1800.0, minutes, 2_000, 30_000)
    assert episode is not None and episode.over_s == 60.0 * 8
    assert not costs.watching
    restored = ChangeCosts().restore(json.loads(json.dumps(costs.to_dict())))
    assert restored.modes["redeploy"].episodes == costs.modes["redeploy"].episodes
    assert restored.predict("redeploy", 20_000, 0, 30_000, 1.0) == costs.predict("redeploy", 20_000, 0, 30_000, 1.0)
