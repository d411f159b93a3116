"""The error budget: minutes over target charged once, failures' catch-up excused, a rolling day."""

from __future__ import annotations

import json

from flinktune.tuner.error_budget import ErrorBudget


def _minutes(start: float, values: list[float]) -> tuple[tuple[float, float], ...]:
    return tuple((start + 60.0 * i, v) for i, v in enumerate(values))


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
    b = ErrorBudget(minutes=10, window_s=3600)
    b.observe(300, _minutes(0, [3_000] * 5), 1_000, failure_window_start=None, watching=False)
    assert b.left() == 5
    b.observe(4_000, _minutes(3_700, [500] * 5), 1_000, failure_window_start=None, watching=False)
    assert b.left() == 10
    again = ErrorBudget(minutes=10, window_s=3600).restore(json.loads(json.dumps(b.to_dict())))
    assert again.left() == b.left() and again.seen_until == b.seen_until
