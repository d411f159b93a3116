"""The rules that keep a new job safe: each one changes a decision.

The price of a change against the error budget, the budget stated in every reason, a spent budget
holding optional changes, no reversal within the hold time, the trust region on steps down, the
failure headroom, and the guard waiting out a change's predicted catch-up before a rollback.
"""

from __future__ import annotations

import dataclasses

from flinktune.config_space import Configuration, default_space
from flinktune.decision import Action, Decision
from flinktune.decision.guard import SafetyGuard
from flinktune.policies import make_policy
from flinktune.tuner.capacity import shape_of
from tests.flinktune.tuner.test_flinktune_policy import CHEAP, _running, ctx, state

SPACE = default_space()
SLOW = {"change_priors": {"rescale": (20.0, 60.0), "redeploy": (120.0, 900.0)}, "failure_prior": (1.0, 0.0)}


def _over(st, minutes: int, p95: float = 900.0):
    """``st`` with ``minutes`` whole minutes before it at ``p95`` (ms)."""
    start = st.ts - 60.0 * (minutes + 1)
    return dataclasses.replace(st, minute_p95=tuple((start + 60.0 * i, p95) for i in range(minutes)))


def test_a_first_shape_waits_while_its_predicted_catch_up_exceeds_what_the_budget_allows():
    slow = make_policy("flinktune", SPACE, memory_headroom=0.7, **SLOW)
    held = slow.decide(state(SPACE.maximum, rate=30000, ts=0), ctx(30000))
    assert held.action is Action.KEEP
    assert "redeploy: " in held.reason and "more than the 7.2 min an optional change may spend" in held.reason
    assert slow.shape is None  # nothing chosen: the next decision chooses afresh
    cheap = make_policy("flinktune", SPACE, memory_headroom=0.7, **CHEAP)
    made = cheap.decide(state(SPACE.maximum, rate=30000, ts=0), ctx(30000))
    assert made.action is Action.RECONFIGURE and "predicted price redeploy" in made.reason


def test_every_reason_states_the_error_budget_and_minutes_over_target_spend_it():
    pol = make_policy("flinktune", SPACE, **CHEAP, min_dwell_s=0, down_horizon_s=300, slo_head_start_s=86400)
    cfg = Configuration(16, 2, 2.0, 2048, 10)
    pol.shape = shape_of(cfg)
    first = pol.decide(_running(cfg, 80000.0, 40000.0, 300), ctx(40000.0))
    assert "error budget 14.4 of 14.4 min over target left (14.4 min per 24 h" in first.reason
    later = pol.decide(_over(_running(cfg, 80000.0, 40000.0, 900), 4), ctx(40000.0))
    assert "error budget 10.4 of 14.4 min" in later.reason and later.inputs["budget_left_min"] == 10.4


def test_a_spent_budget_holds_an_optional_scale_down_that_a_full_one_makes():
    def policy():
        pol = make_policy("flinktune", SPACE, min_dwell_s=0, down_horizon_s=300, slo_budget_minutes=14.4, slo_head_start_s=86400,
                          change_priors={"rescale": (30.0, 60.0), "redeploy": (60.0, 60.0)}, failure_prior=(1.0, 0.0))  # fmt: skip
        cfg = Configuration(16, 2, 2.0, 2048, 10)
        pol.shape = shape_of(cfg)
        pol.capacities.observe(pol.shape, 16, 80000.0)
        return pol, cfg

    full, cfg = policy()
    down = full.decide(_running(cfg, 80000.0, 5000.0, 1200), ctx(5000.0))
    assert down.action is Action.RECONFIGURE and down.target.parallelism < 16
    spent, cfg = policy()
    held = spent.decide(_over(_running(cfg, 80000.0, 5000.0, 1200), 15), ctx(5000.0))
    assert held.action is Action.KEEP and "error budget 0.0 of 14.4" in held.reason
    assert "an optional change may spend now" in held.reason


def test_no_scale_down_within_the_hold_time_of_a_scale_up():
    def policy(hold_s: float):
        pol = make_policy(
            "flinktune", SPACE, **CHEAP, min_dwell_s=0, down_horizon_s=300, reversal_hold_s=hold_s, change_budget=10
        )
        cfg = Configuration(12, 2, 2.0, 2048, 10)
        pol.shape = shape_of(cfg)
        pol.capacities.observe(pol.shape, 12, 60000.0)
        up = pol.decide(_running(cfg, 60000.0, 50000.0, 300), ctx(70000.0))
        assert up.action is Action.RECONFIGURE and up.target.parallelism > 12
        return pol, up.target

    held, bigger = policy(1800.0)
    cap = 60000.0 * bigger.parallelism / 12
    held.decide(_running(bigger, cap, 5000.0, 600), ctx(5000.0))  # the scale-up ran: counted now
    keep = held.decide(_running(bigger, cap, 5000.0, 1200), ctx(5000.0))
    assert keep.action is Action.KEEP and "no reversal within 30 min" in keep.reason
    free, bigger = policy(0.0)
    free.decide(_running(bigger, cap, 5000.0, 600), ctx(5000.0))
    down = free.decide(_running(bigger, cap, 5000.0, 1200), ctx(5000.0))
    assert down.action is Action.RECONFIGURE and down.target.parallelism < bigger.parallelism


def test_the_trust_region_limits_the_first_step_down_and_widens_when_earned():
    def down_to(trust: float) -> int:
        pol = make_policy(
            "flinktune", SPACE, **CHEAP, min_dwell_s=0, down_horizon_s=300, trust_start=trust, reshape_on_down=False
        )
        cfg = Configuration(24, 2, 2.0, 2048, 10)
        pol.shape = shape_of(cfg)
        pol.capacities.observe(pol.shape, 24, 120000.0)
        d = pol.decide(_running(cfg, 120000.0, 3000.0, 600), ctx(3000.0))
        assert d.action is Action.RECONFIGURE
        return d.target.parallelism

    assert down_to(0.5) >= 12  # at most half of p24 in one step
    assert down_to(1.0) < 12


def test_frequent_failures_cap_the_utilization_and_the_reason_says_why():
    pol = make_policy("flinktune", SPACE, change_priors=CHEAP["change_priors"], failure_prior=(60.0, 20.0), min_dwell_s=0,
                      failure_budget_share=0.6)  # fmt: skip
    cfg = Configuration(16, 2, 2.0, 2048, 10)
    pol.shape = shape_of(cfg)
    pol.capacities.observe(pol.shape, 16, 80000.0)
    last = None
    for i in range(12):  # a failure every 5 minutes for an hour
        last = pol.decide(_running(cfg, 80000.0, 30000.0, 300.0 * (i + 1), restarts=1), ctx(30000.0))
    assert last is not None and "utilization capped at" in last.reason and "by failures" in last.reason
    calm = make_policy("flinktune", SPACE, change_priors=CHEAP["change_priors"], failure_prior=(60.0, 20.0), min_dwell_s=0,
                       failure_budget_share=0.6)  # fmt: skip
    calm.shape = shape_of(cfg)
    calm.capacities.observe(calm.shape, 16, 80000.0)
    quiet = calm.decide(_running(cfg, 80000.0, 30000.0, 300.0), ctx(30000.0))
    assert "by failures" not in quiet.reason
    assert pol._util < calm._util


def test_the_guard_waits_out_a_changes_predicted_catch_up_before_a_rollback():
    before = Configuration(24, 1, 1.0, 4096, 10)
    after = Configuration(8, 2, 2.0, 2048, 10)

    def guard(settle_s: float) -> SafetyGuard:
        g = SafetyGuard(SPACE, latency_target_ms=250.0)
        g.record(0.0, state(before, p95=150.0), after, settle_s)
        return g

    missing = state(after, p95=9000.0, ts=400.0)
    noop = Decision.keep("flinktune", "keep")
    assert guard(0.0).review(noop, missing, 400.0).action is Action.RECONFIGURE  # rollback at once
    assert guard(900.0).review(noop, missing, 400.0).action is Action.KEEP  # still catching up
    late = state(after, p95=9000.0, ts=1000.0)
    assert guard(900.0).review(noop, late, 1000.0).action is Action.RECONFIGURE  # missed after it too


def test_a_budget_burning_in_steady_operation_scales_up_what_looked_enough():
    def policy():
        pol = make_policy("flinktune", SPACE, **CHEAP, min_dwell_s=0, down_horizon_s=300)
        cfg = Configuration(16, 2, 2.0, 2048, 10)
        pol.shape = shape_of(cfg)
        pol.capacities.observe(pol.shape, 16, 80000.0)
        return pol, cfg

    calm, cfg = policy()
    keep = calm.decide(_running(cfg, 80000.0, 55000.0, 600), ctx(55000.0))
    assert keep.action is Action.KEEP
    burning, cfg = policy()
    up = burning.decide(_over(_running(cfg, 80000.0, 55000.0, 600), 3), ctx(55000.0))
    assert up.action is Action.RECONFIGURE and up.target.parallelism > 16
    assert "3 min over target in this window with no failure or change to blame" in up.reason


def test_a_scale_up_on_a_steady_climb_plans_for_where_it_leads_and_one_after_a_peak_for_that_peak():
    def scale_up(horizon_s: float, rates: list[float], peak_hours_ago: float | None = None) -> Decision:
        pol = make_policy("flinktune", SPACE, **CHEAP, min_dwell_s=0, ramp_horizon_s=horizon_s)
        cfg = Configuration(8, 2, 2.0, 2048, 10)
        pol.shape = shape_of(cfg)
        pol.capacities.observe(pol.shape, 8, 40000.0)
        if peak_hours_ago is not None:  # the job ran at 50,000 rec/s on a bigger size then
            pol.trend.observe(-3600.0 * peak_hours_ago, 50000.0)
        for i, rate in enumerate(rates[:-1]):  # p8 carries these below its scale-up trigger: it keeps
            assert pol.decide(_running(cfg, 40000.0, rate, 300.0 * (i + 1)), ctx(rate)).action is Action.KEEP
        up = pol.decide(_running(cfg, 40000.0, rates[-1], 300.0 * len(rates)), ctx(rates[-1] * 1.1))
        assert up.action is Action.RECONFIGURE and up.target is not None
        return up

    ramp = [22000.0, 24000.0, 26000.0, 28000.0, 30000.0, 32000.0, 34000.0]  # +400 rec/s a minute
    one, steps = scale_up(1800.0, ramp), scale_up(0.0, ramp)
    assert one.target.parallelism > steps.target.parallelism and "climbed 400 rec/s per minute" in one.reason
    # After a peak within the last day, the next climb is sized for that peak (up to ``growth`` x the plan).
    jump = [12000.0, 12000.0, 34000.0]
    peak, plain = scale_up(1800.0, jump, peak_hours_ago=20), scale_up(0.0, jump, peak_hours_ago=20)
    assert peak.target.parallelism > plain.target.parallelism and "reached 50,000 rec/s within the last day" in peak.reason
    forgotten = scale_up(1800.0, jump, peak_hours_ago=25)  # a peak more than a day ago is forgotten
    assert forgotten.target == plain.target and "one change lasts" not in forgotten.reason


def test_a_job_just_met_has_earned_only_the_head_starts_share_of_the_days_budget():
    held = make_policy("flinktune", SPACE, memory_headroom=0.7, slo_head_start_s=4 * 3600, **SLOW).decide(
        state(SPACE.maximum, rate=30000, ts=0), ctx(30000)
    )
    # 4 h of a day credited: 2.4 of 14.4 min, half of which one optional change may spend.
    assert "error budget 2.4 of 2.4 min" in held.reason and "more than the 1.2 min an optional change may spend" in held.reason
    whole = make_policy("flinktune", SPACE, memory_headroom=0.7, **SLOW)  # the default: a whole day
    day = whole.decide(state(SPACE.maximum, rate=30000, ts=0), ctx(30000))
    assert "error budget 14.4 of 14.4 min" in day.reason and "more than the 7.2 min an optional change may spend" in day.reason
