"""Demeter's published rules (docs/baselines.md, demeter): its failure-reset 10-minute clock, the
constraint check, the screen of the cheapest candidates, switching either way and the profiling
suggestion rules. Small and fast: a function surrogate, no replay."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from flinktune.config_space import default_space
from flinktune.decision import Action, JobState
from flinktune.decision.stages import PolicyContext
from flinktune.decision.testing import FunctionSurrogate, StaticForecaster
from flinktune.policies import make_policy
from flinktune.policies.demeter_ranking import demeter_objective, meets_constraints, screen_candidates
from flinktune.tuner.selection import score_candidates

SPACE = default_space()
MAX = SPACE.maximum


def state(config=MAX, *, ts=0.0, restarts=0, p95=150.0, rate=20000.0, window=60):
    return JobState("j", ts, config, True, rate, rate, 0.0, 0.0, p95, 4, 4000, 0.5, 0.0, window, restarts=restarts)


def ctx(level=20000.0, covered=200000.0, observations=None):
    return PolicyContext(
        latency_target_ms=250.0,
        recovery_limit_s=180.0,
        forecast=StaticForecaster(level).predict(pd.Series(dtype=float), 600),
        surrogate=FunctionSurrogate(SPACE),
        profiled_max_rate=covered,
        observations=observations,
    )


def test_the_ten_minute_clock_starts_with_the_job_and_a_failure_resets_it():
    pol = make_policy("demeter", SPACE)
    # Decided every 60 s from t=60 (the job started at 0): nothing before t=600.
    out = {t: pol.decide(state(ts=float(t)), ctx()) for t in range(60, 600, 60)}
    assert all(d.action is Action.KEEP and d.reason.startswith("next optimisation") for d in out.values())
    assert pol.decide(state(ts=600.0), ctx()).action is Action.RECONFIGURE  # 10 min: optimise
    # A failure seen at t=900 moves the next optimisation from t=1200 to t=1500.
    assert pol.decide(state(MAX, ts=900.0, restarts=1), ctx()).reason.endswith("(reset by a failure)")
    assert pol.decide(state(MAX, ts=1200.0), ctx()).reason.startswith("next optimisation in 300 s")
    assert not pol.decide(state(MAX, ts=1500.0), ctx()).reason.startswith("next optimisation")


def test_the_cheapest_candidates_are_screened_out_before_ranking():
    usage = np.array([[1.0, 1.0], [1.2, 1.2], [2.0, 2.0], [3.0, 3.0], [4.0, 4.0]])
    feasible = np.array([True, True, True, True, False])
    # floor = max(1.25 x 1.0, 25th percentile of [1, 1.2, 2, 3] = 1.15) = 1.25 on both resources
    assert screen_candidates(usage, feasible).tolist() == [2, 3]
    # Screened on each resource: cheap memory alone is enough to be left out.
    assert screen_candidates(np.array([[2.0, 1.0], [2.0, 2.0], [1.0, 2.0]]), np.ones(3, bool)).tolist() == [1]
    # All within 1.25x of the cheapest: nothing passes the screen, so it screens nothing out.
    assert screen_candidates(np.array([[1.0, 1.0], [1.1, 1.1]]), np.ones(2, bool)).tolist() == [0, 1]


def test_the_pick_is_never_the_cheapest_feasible_candidate():
    d = make_policy("demeter", SPACE).decide(state(window=600), ctx())
    assert d.action is Action.RECONFIGURE
    scores = score_candidates(FunctionSurrogate(SPACE), SPACE, d.inputs["planned_rate"], 250.0, 180.0)
    ok = meets_constraints(scores, 250.0, 180.0)
    cpu = min(c.total_cpu for c, f in zip(scores.candidates, ok) if f)
    mem = min(c.total_memory_mb for c, f in zip(scores.candidates, ok) if f)
    assert d.target.total_cpu >= 1.25 * cpu and d.target.total_memory_mb >= 1.25 * mem
    assert d.inputs["screened_out"] > 0


def test_it_switches_when_the_best_candidate_costs_more_than_five_percent_more():
    pol = make_policy("demeter", SPACE)
    first = pol.decide(state(window=600), ctx())
    assert first.action is Action.RECONFIGURE
    scores = score_candidates(FunctionSurrogate(SPACE), SPACE, first.inputs["planned_rate"], 250.0, 180.0)
    ok = meets_constraints(scores, 250.0, 180.0)
    # The current configuration meets the goals and is more than 5 % cheaper than the best (screened out).
    cheap = min(
        (c for c, f in zip(scores.candidates, ok) if f and demeter_objective(c, SPACE) < first.inputs["best_usage"] / 1.06),
        key=lambda c: demeter_objective(c, SPACE),
    )
    d = make_policy("demeter", SPACE).decide(state(cheap, window=600), ctx())
    # The old rule kept a feasible configuration whenever the best one was not >5 % cheaper.
    assert d.action is Action.RECONFIGURE and d.target == first.target
    assert demeter_objective(d.target, SPACE) > 1.05 * demeter_objective(cheap, SPACE)
    # Ranked against itself too (the old candidate set), the best is kept (a profiling round may
    # come with the keep: the profiling thread runs beside the optimiser).
    again = make_policy("demeter", SPACE, candidate_set="all").decide(state(first.target, window=600), ctx())
    assert again.action in (Action.KEEP, Action.PROFILE) and "differs by only" in again.reason


def test_a_current_configuration_that_is_the_cheapest_is_left_for_the_best_other_one():
    # Published (docs/baselines.md, demeter: rescale decision step 3-4): the candidates are the other configurations, so at the
    # best one the optimiser compares the next best with it and, that one being costlier, moves.
    best = make_policy("demeter", SPACE).decide(state(window=600), ctx()).target
    d = make_policy("demeter", SPACE).decide(state(best, window=600), ctx())
    assert d.action is Action.RECONFIGURE and d.target != best
    assert demeter_objective(d.target, SPACE) >= demeter_objective(best, SPACE)
    assert "costlier than the current one" in d.reason


def test_with_no_other_candidate_a_coping_current_configuration_is_kept():
    best = make_policy("demeter", SPACE).decide(state(window=600), ctx()).target
    pol = make_policy("demeter", SPACE)
    # Only the current configuration meets the goals: nothing else to rank, so it stays.
    only_current = lambda scores, *a, **k: np.array([c == best for c in scores.candidates])  # noqa: E731
    pol._feasible = lambda scores, context, chunk: (only_current(scores), {})
    d = pol.decide(state(best, window=600), ctx())
    assert d.action in (Action.KEEP, Action.PROFILE) and "no other configuration meets the goals" in d.reason
    with pytest.raises(ValueError, match="candidate_set"):
        make_policy("demeter", SPACE, candidate_set="mine")


def test_the_constraint_check_is_mean_plus_std_scaled_by_1_25():
    scores = score_candidates(FunctionSurrogate(SPACE, std=0.0), SPACE, 20000.0, 250.0, 180.0)
    ok = meets_constraints(scores, 250.0, 180.0)
    # 1.25 x tanh(log_4(L / lowest)) <= 0.5 with lowest = 250 / 2.14 means L <= 0.84 x 250 = 210 ms
    lat_ok = scores.latency_ms <= 0.84 * 250.0 * (1 + 1e-3)
    rec_ok = 1.25 * scores.recovery_s <= 180.0
    assert np.array_equal(ok, lat_ok & rec_ok)
    assert (lat_ok & ~ok).any() or (rec_ok & ~ok).any() or ok.all()


def test_profiling_suggestions_follow_the_published_acceptance_rules():
    pol = make_policy("demeter", SPACE)
    good = pol.profiling_candidates(state(MAX, window=600), ctx(), 60000.0)
    assert good and all(c.total_cpu >= 0.25 * MAX.total_cpu and c.total_memory_mb >= 0.25 * MAX.total_memory_mb for c in good)
    assert any(c.total_cpu < 0.75 * MAX.total_cpu for c in good)
    bad = pol.profiling_candidates(state(MAX, window=600, p95=9000.0), ctx(), 60000.0)
    assert bad and all(c.total_cpu >= 0.75 * MAX.total_cpu for c in bad)
    fell_behind = next(c for c in good if c.total_cpu < MAX.total_cpu)
    obs = pd.DataFrame([{**fell_behind.to_dict(), "input_rate": 40000.0, "latency_ms": 5000.0}])
    after = pol.profiling_candidates(state(MAX, window=600), ctx(observations=obs), 60000.0)
    assert fell_behind in good and fell_behind not in after
    # At 20k the target chunk is [20k, 30k]: 40k is above it, so it fell behind at more load, not less.
    assert fell_behind in pol.profiling_candidates(state(MAX, window=600), ctx(observations=obs), 20000.0)
    # Without profiles the published optimiser is still quasi-random: it draws without the size rule.
    d = pol.decide(state(MAX, window=600), ctx(60000.0, covered=30000.0))
    assert d.action is Action.PROFILE and "quasi-random" in d.reason
    assert any(c.total_cpu < 0.25 * MAX.total_cpu for c in d.profile_configs), d.profile_configs
    legacy = make_policy("demeter", SPACE, suggestions="surrogate").decide(state(MAX, window=600), ctx(60000.0, covered=30000.0))
    assert legacy.action is Action.PROFILE
    assert all(c.total_cpu >= 0.25 * MAX.total_cpu for c in legacy.profile_configs)


def test_the_published_keep_rule_moves_to_a_best_candidate_costlier_by_under_five_percent():
    first = make_policy("demeter", SPACE).decide(state(window=600), ctx())
    scores = score_candidates(FunctionSurrogate(SPACE), SPACE, first.inputs["planned_rate"], 250.0, 180.0)
    ok = meets_constraints(scores, 250.0, 180.0)
    best = first.inputs["best_usage"]
    usage = {c: demeter_objective(c, SPACE) for c, f in zip(scores.candidates, ok) if f and c != first.target}
    # Feasible, and cheaper than the best ranked by under 5 %: the best is costlier by under 5 %.
    near = next(c for c, u in usage.items() if best / 1.05 < u < best)
    moved = make_policy("demeter", SPACE).decide(state(near, window=600), ctx())
    assert moved.action is Action.RECONFIGURE and moved.target == first.target and "costlier" in moved.reason
    kept = make_policy("demeter", SPACE, keep_rule="symmetric").decide(state(near, window=600), ctx())
    assert kept.action in (Action.KEEP, Action.PROFILE) and "differs by only" in kept.reason
    # Costlier than the best by under 5 %: both rules keep it.
    above = next(c for c, u in usage.items() if best < u < best * 1.05)
    for rule in ("published", "symmetric"):
        d = make_policy("demeter", SPACE, keep_rule=rule).decide(state(above, window=600), ctx())
        assert d.action in (Action.KEEP, Action.PROFILE) and "differs by only" in d.reason
    with pytest.raises(ValueError, match="keep_rule must be 'published' or 'symmetric'"):
        make_policy("demeter", SPACE, keep_rule="lazy").decide(state(near, window=600), ctx())
