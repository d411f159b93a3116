"""Demeter's target chunk (docs/baselines.md, demeter): the first 10k rec/s chunk whose lower bound is at or
above the planned rate, its profiles (inside, bounds included; good above; bad below; one per
configuration, the closest to the chunk's upper bound), the Sobol rule (fewer than 3 profiles in
the chunk: keep and profile, whatever their latencies) and profiling at the current rate (the
published profiling jobs read the production job's input topic)."""

from __future__ import annotations

import pandas as pd
import pytest

from flinktune.config_space import default_space
from flinktune.decision import Action, JobState
from flinktune.decision.stages import PolicyContext
from flinktune.decision.testing import FunctionSurrogate, StaticForecaster
from flinktune.policies import make_policy
from flinktune.policies.demeter_chunks import chunk_profiles, target_chunk

SPACE = default_space()
MAX = SPACE.maximum


def _state(rate=20000.0):
    return JobState("j", 0.0, MAX, True, rate, rate, 0.0, 0.0, 150.0, 4, 4000, 0.5, 0.0, 600)


def _ctx(planned, obs, fitted, per_slot_rate=5000.0):
    def fit(df):
        fitted.append(df)
        return FunctionSurrogate(SPACE, per_slot_rate=per_slot_rate)

    return PolicyContext(
        latency_target_ms=250.0,
        recovery_limit_s=180.0,
        forecast=StaticForecaster(planned / 1.10).predict(pd.Series(dtype=float), 600),
        surrogate=FunctionSurrogate(SPACE),
        profiled_max_rate=200000.0,
        observations=obs,
        fit_surrogate=fit,
    )


def _obs(rows):
    knobs = MAX.to_dict()
    return pd.DataFrame(
        [{**knobs, "parallelism": p, "input_rate": r, "latency_ms": lat, "recovery_s": 60.0} for p, r, lat in rows]
    )


def test_the_target_chunk_is_the_first_whose_lower_bound_is_at_or_above_the_planned_rate():
    assert target_chunk([10000.0], 35000.0, 10000.0) == (40000.0, 50000.0)  # not [30k, 40k), which holds 35k
    assert target_chunk([10000.0], 30000.0, 10000.0) == (30000.0, 40000.0)  # on a bound: that chunk
    assert target_chunk([12000.0], 35000.0, 10000.0, current_rate=9000.0) == (39000.0, 49000.0)  # from the current rate


def test_the_target_chunk_holds_its_profiles_the_good_ones_above_and_the_bad_ones_below():
    obs = _obs([
        (8, 10000.0, 100.0),   # below, good: says nothing about more load -> out
        (12, 12000.0, 900.0),  # below, bad: fails at more load too -> in
        (16, 34000.0, 100.0),  # holds the planned 35k but is below the target chunk [40k, 50k] -> out
        (20, 41000.0, 100.0),  # inside -> in, but deduplicated: 48k is closer to the upper bound
        (20, 48000.0, 120.0),  # inside -> in
        (24, 50000.0, 100.0),  # on the upper bound: inside -> in
        (4, 55000.0, 900.0),   # above, bad -> out
        (8, 60000.0, 100.0),   # above, good: copes with less -> in (dedup against the 10k one)
    ])  # fmt: skip
    rows = chunk_profiles(obs, 35000.0, 250.0, 10000.0)
    assert sorted(rows["parallelism"]) == [8, 12, 20, 24]
    assert rows.set_index("parallelism").loc[20, "latency_ms"] == 120.0
    assert rows.set_index("parallelism").loc[8, "latency_ms"] == 100.0
    assert (rows["input_rate"] == 40000.0).all()  # the chunk's model has no rate input


def test_the_model_predicts_from_three_profiles_in_the_chunk_even_all_bad():
    # Two profiles in the target chunk: the published model is still Sobol: keep, and profile.
    two = _obs([(12, 12000.0, 900.0), (16, 45000.0, 900.0)])
    fitted: list = []
    d = make_policy("demeter", SPACE).decide(_state(), _ctx(35000.0, two, fitted))
    assert d.action is Action.PROFILE and "holds 2 profiles" in d.reason and not fitted
    # Three, none with a good latency: the model is fitted and decides (the old rule profiled on).
    three = _obs([(12, 12000.0, 900.0), (16, 45000.0, 900.0), (20, 47000.0, 900.0)])
    d = make_policy("demeter", SPACE, constraint_models="surrogate").decide(_state(), _ctx(35000.0, three, fitted))
    assert d.action is not Action.PROFILE and len(fitted) == 1 and len(fitted[0]) == 3
    # With the published constraint models the all-bad chunk leaves nothing feasible: stay at the
    # maximum (a profiling round may come with that keep), decided by the model, not by the Sobol rule.
    d = make_policy("demeter", SPACE).decide(_state(), _ctx(35000.0, three, fitted))
    assert len(fitted) == 2 and "no configuration meets the goals" in d.reason and "holds" not in d.reason


def test_profiling_runs_at_the_current_rate():
    two = _obs([(12, 12000.0, 900.0), (16, 45000.0, 900.0)])
    d = make_policy("demeter", SPACE).decide(_state(rate=21000.0), _ctx(35000.0, two, []))
    assert d.action is Action.PROFILE and d.inputs["profile_rate"] == 21000.0
    assert abs(d.inputs["planned_rate"] - 35000.0) < 1e-6
    off = make_policy("demeter", SPACE, profile_at_current_rate=False).decide(_state(rate=21000.0), _ctx(35000.0, two, []))
    assert abs(off.inputs["profile_rate"] - 35000.0) < 1e-6


def test_profiling_rounds_come_with_the_keeps_on_their_own_clock_within_the_budget():
    pol = make_policy("demeter", SPACE)
    st = _state()  # at t=0 after a 600 s window: the first optimisation
    # All-bad chunk at the maximum: nothing is feasible, stay at the maximum; the profiling thread
    # (not only the Sobol case) profiles in its round. (The chunk's model: 100 rec/s per slot.)
    three = _obs([(12, 12000.0, 900.0), (16, 45000.0, 900.0), (20, 47000.0, 900.0)])
    d = pol.decide(st, _ctx(35000.0, three, [], per_slot_rate=100.0))
    assert d.action is Action.PROFILE and "stay at the maximum" in d.reason
    # Budget: (50 CPU - 24) x 0.95^3 = 22.3 CPU for the round's suggestions together.
    cpu, mem = pol.profiling_budget(st, 3)
    assert abs(cpu - 26.0 * 0.95**3) < 1e-9 and abs(mem - (430_000.0 - MAX.total_memory_mb) * 0.95**3) < 1e-6
    assert sum(c.total_cpu for c in d.profile_configs) <= cpu + 1e-9
    # The next optimisation, 10 min later, keeps without profiling: the round (900 s) is not due.
    d2 = pol.decide(
        JobState("j", 600.0, MAX, True, 20000.0, 20000.0, 0.0, 0.0, 150.0, 4, 4000, 0.5, 0.0, 60),
        _ctx(35000.0, three, [], per_slot_rate=100.0),
    )
    assert d2.action is Action.KEEP and "next profiling round in 300 s" in d2.reason


def test_a_chunk_with_its_own_good_and_bad_profiles_trains_on_those_alone():
    # Target chunk [40k, 50k] of a planned 35k: three profiles inside it, good and bad among them,
    # and two it inherits (bad below, good above).
    obs = _obs([
        (12, 10000.0, 900.0),  # below, bad: inherited
        (16, 41000.0, 900.0),  # inside, bad
        (20, 45000.0, 100.0),  # inside, good
        (24, 48000.0, 120.0),  # inside, good
        (8, 60000.0, 100.0),   # above, good: inherited
    ])  # fmt: skip
    assert sorted(chunk_profiles(obs, 35000.0, 250.0, 10000.0)["parallelism"]) == [8, 12, 16, 20, 24]
    own = chunk_profiles(obs, 35000.0, 250.0, 10000.0, direct_first=True)
    assert sorted(own["parallelism"]) == [16, 20, 24]
    # Without a bad latency inside (or with fewer than three inside) the inherited ones stay.
    all_good = obs[obs["parallelism"] != 16]
    assert len(chunk_profiles(all_good, 35000.0, 250.0, 10000.0, direct_first=True)) == 4
    two_inside = obs[obs["parallelism"] != 24]
    assert len(chunk_profiles(two_inside, 35000.0, 250.0, 10000.0, direct_first=True)) == 4


def test_the_profiling_budget_counts_the_profiles_the_chunk_is_trained_on():
    # A chunk trained on its own three profiles: the round's budget is 26 x 0.95^3, not 0.95^24 for
    # all the chunk's 24 configurations, 21 of them small ones that fell behind at lower rates.
    small = [(p, 10000.0 + 100.0 * (p - 1), 900.0) for p in range(1, 24)]
    obs = _obs([*small, (16, 41000.0, 900.0), (20, 45000.0, 100.0), (24, 48000.0, 120.0)])
    decided = {
        mode: make_policy("demeter", SPACE, chunk_training=mode, constraint_models="surrogate").decide(
            _state(), _ctx(35000.0, obs, [], per_slot_rate=100.0)
        )
        for mode in ("published", "all")
    }
    cap = {mode: sum(c.total_cpu for c in d.profile_configs) for mode, d in decided.items()}
    assert decided["published"].action is Action.PROFILE, decided["published"].reason
    assert 26.0 * 0.95**24 < cap["published"] <= 26.0 * 0.95**3 + 1e-9
    assert cap["all"] <= 26.0 * 0.95**24 + 1e-9


def test_an_unknown_chunk_training_is_rejected():
    with pytest.raises(ValueError, match="chunk_training must be"):
        make_policy("demeter", SPACE, chunk_training="direct")


def test_the_published_chunks_place_a_profile_at_the_throughput_it_reached():
    # Offered 45k, it processed 22k and fell behind: on the throughput axis it sits at 22k, below
    # the target chunk [40k, 50k] with a bad latency (inherited), not inside it.
    obs = _obs([(16, 45000.0, 900.0), (20, 45000.0, 100.0), (24, 48000.0, 120.0)]).assign(throughput=[22000.0, 45000.0, 48000.0])
    seen: dict[str, pd.DataFrame] = {}
    for axis in ("input", "throughput"):
        pol = make_policy("demeter", SPACE, chunk_rate=axis)
        seen[axis] = pol._observations(_ctx(35000.0, obs, []))
    assert seen["input"] is obs
    assert seen["throughput"]["input_rate"].tolist() == [22000.0, 45000.0, 48000.0]
    lo = chunk_profiles(seen["throughput"], 35000.0, 250.0, 10000.0)
    assert sorted(lo["parallelism"]) == [16, 20, 24]  # 16 comes in as bad below the chunk
    # With the chunks starting at 22k the planned 35k's target chunk is [42k, 52k].
    assert target_chunk(seen["throughput"]["input_rate"].to_numpy(), 35000.0, 10000.0) == (42000.0, 52000.0)
    with pytest.raises(ValueError, match="chunk_rate must be"):
        make_policy("demeter", SPACE, chunk_rate="output")


def test_with_a_supporting_higher_chunk_one_profile_lets_the_model_decide():
    # Target chunk [42k, 52k] for a planned 35k holds one profile; the chunk above, [52k, 62k], holds
    # three of its own (and the bad one below it): it supports the target (RGPE), so the published
    # target optimiser's num_init is 1 and the model decides from that one profile.
    obs = _obs([(16, 45000.0, 900.0), (4, 55000.0, 900.0), (8, 56000.0, 900.0), (12, 58000.0, 900.0)])
    fitted: list = []
    d = make_policy("demeter", SPACE).decide(_state(), _ctx(35000.0, obs, fitted))
    assert len(fitted) == 1 and len(fitted[0]) == 1
    assert "no configuration meets the goals" in d.reason and "holds" not in d.reason
    assert d.inputs["constraint_support"] == 1
    if d.action is Action.PROFILE:  # its round, when it comes with the keep, is drawn from the chunk's model
        assert "qNEHVI on the target chunk's model of 1 profiles" in d.inputs["suggestion_step"]
    # The num_init gate waits for three profiles in the target chunk whatever supports it.
    old = make_policy("demeter", SPACE, sobol_gate="num_init").decide(_state(), _ctx(35000.0, obs, []))
    assert old.action is Action.PROFILE and "holds 1 profiles, 0 with a good latency (3 needed)" in old.reason
    # Without a supporting chunk (the higher profiles dropped) one profile is not enough.
    alone = make_policy("demeter", SPACE).decide(_state(), _ctx(35000.0, obs.iloc[:1], []))
    assert alone.action is Action.PROFILE and "(3 needed)" in alone.reason


def test_an_unknown_sobol_gate_is_rejected():
    with pytest.raises(ValueError, match="sobol_gate must be 'published' or 'num_init'"):
        make_policy("demeter", SPACE, sobol_gate="two")
