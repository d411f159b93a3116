"""The error budget: minutes over target charged once, failures' catch-up excused, a rolling day, earned as the job is watched."""

from __future__ import annotations

import json

from flinktune.tuner.error_budget import ErrorBudget


def _minutes(start: float, values: list[float]) -> tuple[tuple[float, float], ...]:
    return tuple((start + 60.0 * i, v) for i, v in enumerate(values))


DAY = 86400.0


def test_minutes_over_target_are_charged_once_across_overlapping_windows():
    b = ErrorBudget(minutes=10)
    window = _minutes(0, [500, 3_000, 3_000, 500, 500])
    b.observe(300, window, 1_000, failure_window_start=None, watching=False)
    b.observe(360, _minutes(60, [3_000, 3_000, 500, 500, 500]), 1_000, failure_window_start=None, watching=False)
    assert b.spent() == 2 and b.left() == 8
    assert "8.0 of 10 min" in b.describe()


def test_a_failures_downtime_is_excused_its_catch_up_is_charged_and_a_watched_change_pays_for_all():
    b = ErrorBudget(minutes=10)
    b.observe(300, _minutes(0, [3_000] * 5), 1_000, failure_window_start=0, watching=False, failure_minutes=2)
    assert b.spent() == 3  # the first two minutes over target are the failure's downtime
    w = ErrorBudget(minutes=10)
    w.observe(300, _minutes(0, [3_000] * 5), 1_000, failure_window_start=0, watching=True, failure_minutes=2)
    assert w.spent() == 5


def test_the_budget_rolls_over_a_day_and_survives_json():
    b = ErrorBudget(minutes=10, window_s=3600, head_start_s=3600)
    b.observe(300, _minutes(0, [3_000] * 5), 1_000, failure_window_start=None, watching=False)
    assert b.left() == 5
    b.observe(4_000, _minutes(3_700, [500] * 5), 1_000, failure_window_start=None, watching=False)
    assert b.left() == 10
    again = ErrorBudget(minutes=10, window_s=3600, head_start_s=3600).restore(json.loads(json.dumps(b.to_dict())))
    assert again.left() == b.left() and again.seen_until == b.seen_until


def test_the_budget_is_earned_at_the_slos_rate_from_the_head_start():
    b = ErrorBudget(minutes=14.4, head_start_s=4 * 3600)
    assert b.left() == 2.4  # 4 h of a day credited before the first decision
    b.observe(300, _minutes(0, [500] * 5), 1_000, failure_window_start=None, watching=False)
    assert round(b.earned(), 2) == 2.45  # 4 h + the 5 minutes seen
    b.observe(8 * 3600, _minutes(8 * 3600 - 300, [3_000] + [500] * 4), 1_000, failure_window_start=None, watching=False)
    assert round(b.left(), 2) == round(14.4 * 12 / 24 - 1, 2)  # 8 h watched + the head start, one minute spent
    assert "min over target left (14.4 min per 24 h, earned as the job is watched)" in b.describe()
    b.observe(DAY, _minutes(DAY - 300, [500] * 5), 1_000, failure_window_start=None, watching=False)
    assert b.earned() == 14.4  # a whole day: the day's budget, no more
