"""Demeter's published constraint models (docs/baselines.md, demeter): the fixed N(0, 0.1) observation
noise and the RGPE support from a higher chunk. Small GPs on a handful of profiles, CPU, seconds."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from flinktune.config_space import Configuration, default_space
from flinktune.decision import Action, JobState
from flinktune.decision.stages import PolicyContext
from flinktune.decision.testing import FunctionSurrogate, StaticForecaster
from flinktune.policies import make_policy
from flinktune.policies.demeter_chunks import chunk_rows, support_chunks
from flinktune.policies.demeter_constraints import (
    CONSTRAINT_SEM,
    fit_constraint_models,
    fit_fixed_noise_gp,
    latency_constraint,
    noisy_constraints,
)

SPACE = default_space()
A1, A2, A3 = Configuration(8, 4, 1.0, 1024, 10), Configuration(8, 4, 1.0, 1024, 50), Configuration(8, 4, 1.0, 2048, 10)
BIG, E, F = SPACE.maximum, Configuration(16, 2, 1.0, 4096, 10), Configuration(24, 2, 1.0, 2048, 30)


def row(cfg: Configuration, rate: float, lat: float, rec: float = 30.0) -> dict:
    return {**cfg.to_dict(), "input_rate": rate, "latency_ms": lat, "recovery_s": rec, "throughput": rate,
            "cpu_used": 1.0, "memory_used_mb": 1000.0}  # fmt: skip


def observations() -> pd.DataFrame:
    # Target chunk [20k, 30k]: two small configurations. Higher chunk [30k, 40k]: six profiles, all
    # just over the latency target (so none is assigned to the target chunk), the largest by far the
    # fastest: its shape says the maximum copes, which the target chunk alone cannot tell.
    target = [row(A1, 25000, 260.0), row(A3, 25000, 120.0)]
    higher = [row(A1, 35000, 4000.0), row(A2, 35000, 3500.0), row(A3, 35000, 3000.0), row(BIG, 35000, 260.0),
              row(E, 35000, 3000.0), row(F, 35000, 2500.0)]  # fmt: skip
    return pd.DataFrame(target + higher)


def test_the_constraint_observations_get_the_fixed_published_noise():
    y = np.zeros(4000)
    lat, rec = noisy_constraints(y, y + 3.0, 20000.0, 30000.0, CONSTRAINT_SEM)
    assert abs(float(np.std(lat)) - 0.1) < 0.01 and abs(float(np.std(rec - 3.0)) - 0.1) < 0.01
    # Seeded by the chunk's bounds: the same chunk draws the same noise, another chunk other noise.
    again, _ = noisy_constraints(y, y, 20000.0, 30000.0, CONSTRAINT_SEM)
    other, _ = noisy_constraints(y, y, 30000.0, 40000.0, CONSTRAINT_SEM)
    assert np.array_equal(lat, again) and not np.allclose(lat, other)
    assert np.array_equal(noisy_constraints(y, y, 20000.0, 30000.0, None)[0], y)
    # The GP's observation variance is the fixed 0.1^2 in the outcome's units, not fitted.
    x = np.random.default_rng(0).uniform(size=(6, 5))
    for scale in (1.0, 10.0):
        gp = fit_fixed_noise_gp(x, scale * x.sum(axis=1))
        noise = gp.likelihood.noise.detach() * gp.outcome_transform.stdvs.detach().squeeze() ** 2
        assert np.allclose(noise.numpy(), CONSTRAINT_SEM**2)


def test_the_latency_constraint_is_bounded_and_zero_below_the_lowest_latency():
    y = latency_constraint(np.array([50.0, 116.0, 0.84 * 250.0, 250.0, 1e6]), 250.0)
    assert y[0] == 0.0 and y[1] == 0.0
    assert y[2] == pytest.approx(np.log1p(0.5 / 1.25), abs=2e-3)  # 0.84 x target: 1.25 x norm = 0.5
    assert y[3] == pytest.approx(np.log1p(0.5), abs=1e-6)  # the target is Demeter's bad-latency boundary
    assert y[4] < np.log(2.0)


def test_support_from_a_higher_chunk_makes_a_configuration_feasible():
    obs = observations()
    rows = chunk_rows(obs, 20000.0, 30000.0, 250.0)
    support = support_chunks(obs, 30000.0, 10000.0, 250.0)
    assert len(rows) == 2 and [(lo, len(r)) for lo, _, r in support] == [(30000.0, 6)]
    x = np.array([SPACE.normalise(BIG), SPACE.normalise(E)])
    alone = fit_constraint_models((20000.0, 30000.0, rows), [], SPACE, 250.0)
    helped = fit_constraint_models((20000.0, 30000.0, rows), support, SPACE, 250.0)
    assert helped.n_support == 1 and helped.weights["latency"] == [0.5, 0.5]  # < 3 target profiles: uniform
    # The maximum is far from the target chunk's two profiles: too uncertain alone, feasible with support.
    assert alone.feasible(x, 180.0).tolist()[0] is False
    assert helped.feasible(x, 180.0).tolist()[0] is True
    # E, slow in the higher chunk, stays infeasible: the support carries the shape, not a blanket yes.
    assert helped.feasible(x, 180.0).tolist()[1] is False
    p_alone, p_helped = alone.predict(x), helped.predict(x)
    assert p_helped["latency"][0][0] < p_alone["latency"][0][0] and p_helped["latency"][1][0] < p_alone["latency"][1][0]


def test_the_policy_judges_the_constraints_with_the_published_models():
    obs = pd.DataFrame(
        [row(A1, 25000, 260.0), row(A3, 25000, 120.0), row(A2, 25000, 150.0), *observations().iloc[2:].to_dict("records")]
    )
    ctx = PolicyContext(
        latency_target_ms=250.0,
        recovery_limit_s=180.0,
        forecast=StaticForecaster(20000.0 / 1.1).predict(pd.Series(dtype=float), 600),
        surrogate=FunctionSurrogate(SPACE),
        profiled_max_rate=35000.0,
        observations=obs,
        fit_surrogate=lambda rows: FunctionSurrogate(SPACE),
    )
    st = JobState("j", 600.0, BIG, True, 20000.0, 20000.0, 0.0, 0.0, 150.0, 4, 4000, 0.5, 0.0, 600)
    published = make_policy("demeter", SPACE).decide(st, ctx)
    assert published.action in (Action.KEEP, Action.PROFILE, Action.RECONFIGURE)
    assert published.inputs["constraint_support"] == 1
    old = make_policy("demeter", SPACE, constraint_models="surrogate").decide(st, ctx)
    assert "constraint_support" not in old.inputs
    with pytest.raises(ValueError, match="constraint_models"):
        make_policy("demeter", SPACE, constraint_models="nope").decide(st, ctx)
