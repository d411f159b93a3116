"""Demeter's profiling thread (docs/baselines.md, demeter): the accepted suggestions and the round's budget."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from flinktune.config_space import default_space
from flinktune.decision import JobState
from flinktune.policies.demeter_constraints import fit_constraint_models
from flinktune.policies.demeter_profiling import (
    model_suggestions,
    pack_budget,
    profiling_budget,
    profiling_candidates,
    sobol_suggestions,
)

SPACE = default_space()
MAX = SPACE.maximum


def _state(latency_ms: float) -> JobState:
    return JobState("j", 0.0, MAX, True, 20000.0, 20000.0, 0.0, 0.0, latency_ms, 4, 4000, 0.5, 0.0, 600)


def test_the_budget_is_the_spare_share_shrunk_per_trial() -> None:
    cpu, mem = profiling_budget(MAX, 2, 50.0, 430_000.0, 0.95)
    assert abs(cpu - (50.0 - MAX.total_cpu) * 0.95**2) < 1e-9
    assert abs(mem - (430_000.0 - MAX.total_memory_mb) * 0.95**2) < 1e-6
    assert profiling_budget(MAX, 0, 10.0, 1.0, 0.95) == (0.0, 0.0)  # a production job over the share leaves none


def test_candidates_are_large_enough_and_not_known_to_fail_or_already_profiled() -> None:
    small = MAX.with_(parallelism=4)
    obs = pd.DataFrame([
        {**small.to_dict(), "input_rate": 10000.0, "latency_ms": 900.0},  # fell behind below the chunk
        {**MAX.with_(parallelism=20).to_dict(), "input_rate": 45000.0, "latency_ms": 100.0},  # in the chunk
    ])  # fmt: skip
    good = profiling_candidates(SPACE, _state(100.0), obs, 35000.0, 250.0, 10000.0, None)
    assert small not in good and MAX.with_(parallelism=20) not in good
    assert all(c.total_cpu >= 0.25 * MAX.total_cpu for c in good) and len(good) > 0
    # A production job over its latency target only accepts suggestions of 0.75 x its size or more.
    bad = profiling_candidates(SPACE, _state(900.0), None, 35000.0, 250.0, 10000.0, None)
    assert bad and all(c.total_cpu >= 0.75 * MAX.total_cpu for c in bad)
    assert len(bad) < len(profiling_candidates(SPACE, _state(100.0), None, 35000.0, 250.0, 10000.0, None))


def test_the_round_packs_suggestions_in_order_passing_over_one_that_overflows() -> None:
    big, small = MAX, MAX.with_(parallelism=4)
    mid = MAX.with_(parallelism=12)
    cap = big.total_cpu + small.total_cpu
    # big fits, mid would overflow and is passed over, small still fits; a repeat is not taken twice.
    assert pack_budget([big, mid, small, small], cap, 1e12) == [big, small]
    assert pack_budget([big], big.total_cpu - 0.5, 1e12) == []
    assert pack_budget([small, big], 1e12, small.total_memory_mb) == [small]  # memory binds too


def test_the_quasi_random_phase_is_seeded_by_the_chunk_and_fills_the_budget() -> None:
    cands = SPACE.candidates()
    cap_cpu, cap_mem = 40.0, 200_000.0
    first = sobol_suggestions(cands, (40000.0, 50000.0), cap_cpu, cap_mem)
    assert first == sobol_suggestions(cands, (40000.0, 50000.0), cap_cpu, cap_mem)  # the same chunk: the same draw
    assert first != sobol_suggestions(cands, (50000.0, 60000.0), cap_cpu, cap_mem)
    assert len(set(first)) == len(first) >= 2 and all(c in cands for c in first)
    used_cpu, used_mem = sum(c.total_cpu for c in first), sum(c.total_memory_mb for c in first)
    assert used_cpu <= cap_cpu + 1e-9 and used_mem <= cap_mem + 1e-9
    # Filled: no other candidate fits in what is left (the published loop draws for 600 s).
    assert not any(
        c not in first and used_cpu + c.total_cpu <= cap_cpu and used_mem + c.total_memory_mb <= cap_mem for c in cands
    )
    # The draw spreads over sizes rather than following the model's boundary.
    assert max(c.total_cpu for c in first) >= 2 * min(c.total_cpu for c in first)


def _chunk_rows() -> pd.DataFrame:
    rows = []
    for p, lat in ((4, 2000.0), (8, 900.0), (16, 150.0), (20, 120.0), (24, 110.0)):
        cfg = MAX.with_(parallelism=p)
        rows.append({**cfg.to_dict(), "input_rate": 45000.0, "latency_ms": lat, "recovery_s": 60.0})
    return pd.DataFrame(rows)


def test_the_modelled_phase_suggests_by_qnehvi_on_the_chunk_model_within_the_budget() -> None:
    rows = _chunk_rows()
    fit = fit_constraint_models((40000.0, 50000.0, rows), [], SPACE, 250.0)
    profiled = {MAX.with_(parallelism=int(p)) for p in rows["parallelism"]}
    cands = [c for c in SPACE.candidates() if c not in profiled]
    cap_cpu, cap_mem = 30.0, 150_000.0
    picks = model_suggestions(fit, SPACE, cands, rows, cap_cpu, cap_mem, 180.0, max_suggestions=4, seed=9)
    assert picks and len(set(picks)) == len(picks) <= 4 and all(c in cands for c in picks)
    assert sum(c.total_cpu for c in picks) <= cap_cpu + 1e-9 and sum(c.total_memory_mb for c in picks) <= cap_mem + 1e-9
    assert picks == model_suggestions(fit, SPACE, cands, rows, cap_cpu, cap_mem, 180.0, max_suggestions=4, seed=9)
    # The chunk's model knows the small ones fell behind: the first pick may well meet the latency
    # constraint (its predicted mean is under the boundary), unlike the cheapest candidates.
    lat_mean, _ = fit.predict(np.array([SPACE.normalise(picks[0])]))["latency"]
    assert lat_mean[0] < np.log1p(0.5)
    assert model_suggestions(fit, SPACE, cands, rows, 0.5, cap_mem, 180.0) == []  # nothing fits the budget


def test_the_policy_draws_quasi_random_suggestions_then_uses_the_chunk_model() -> None:
    from flinktune.decision import Action
    from flinktune.decision.stages import PolicyContext
    from flinktune.decision.testing import FunctionSurrogate, StaticForecaster
    from flinktune.policies import make_policy

    def ctx(obs: pd.DataFrame) -> PolicyContext:
        return PolicyContext(
            latency_target_ms=250.0,
            recovery_limit_s=180.0,
            forecast=StaticForecaster(35000.0 / 1.10).predict(pd.Series(dtype=float), 600),
            surrogate=FunctionSurrogate(SPACE),
            observations=obs,
            fit_surrogate=lambda df: FunctionSurrogate(SPACE, per_slot_rate=100.0),
        )

    rows = _chunk_rows()
    state = JobState("j", 600.0, MAX, True, 20000.0, 20000.0, 0.0, 0.0, 150.0, 4, 4000, 0.5, 0.0, 600)
    early = make_policy("demeter", SPACE, constraint_models="surrogate").decide(state, ctx(rows.iloc[:2]))
    assert early.action is Action.PROFILE and "quasi-random" in early.reason, early.reason
    # Every profile in the chunk fell behind: nothing is predicted feasible, the job stays at the
    # default, and the round is drawn by the chunk's model.
    later = make_policy("demeter", SPACE).decide(state, ctx(rows.assign(latency_ms=900.0)))
    assert later.action is Action.PROFILE and "qNEHVI on the target chunk's model of 5 profiles" in later.reason
    assert later.inputs["suggestion_step"] in later.reason
    with pytest.raises(ValueError, match="suggestions must be"):
        make_policy("demeter", SPACE, suggestions="random")
