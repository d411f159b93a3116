"""suggest_profiling: constrained qLogNEHVI over discrete candidates, by known answers and with RGPE."""

import numpy as np
import pytest

from flinktune.config_space import ConfigSpace
from models.surrogate.acquisition import suggest_profiling
from models.surrogate.rgpe_surrogate import RGPESurrogate
from models.surrogate.types import SurrogatePrediction

LAT, REC = np.log(100.0), np.log(180.0)


class TableSurrogate:
    """Known Gaussian marginals per candidate row (no BoTorch model: the tabulated path)."""

    outcomes = ("latency_ms", "recovery_s")

    def __init__(self, X, lat_mean, lat_std, rec_mean):
        self.X, self.lat_mean, self.lat_std, self.rec_mean = X, lat_mean, lat_std, rec_mean

    def predict(self, X, rate):
        idx = [int(np.argmin(np.abs(self.X - x).sum(axis=1))) for x in X]
        mean = np.column_stack([self.lat_mean[idx], self.rec_mean[idx]])
        std = np.column_stack([self.lat_std[idx], np.full(len(idx), 0.01)])
        return SurrogatePrediction(self.outcomes, mean, std)


def grid(m=8):
    X = np.column_stack([np.linspace(0, 1, m), np.zeros(m)])
    reserved = np.column_stack([1.0 + np.arange(m), 1000.0 * (1 + np.arange(m))])  # cost grows with index
    return X, reserved


def test_first_pick_is_the_cheapest_candidate_that_is_surely_feasible():
    X, reserved = grid()
    lat = np.log(np.array([400, 300, 250, 80, 70, 60, 50, 40.0]))  # 0-2 surely too slow, 3.. surely fine
    sur = TableSurrogate(X, lat, np.full(8, 0.05), np.full(8, np.log(60.0)))
    picks = suggest_profiling(
        sur,
        X,
        30_000,
        latency_limit_log=LAT,
        recovery_limit_log=REC,
        budget_mask=np.ones(8, bool),
        reserved=reserved,
        q=1,
        seed=0,
    )
    assert picks.tolist() == [3]
    # recovery too long for 3 and 4: the next cheapest
    rec = np.log(np.array([60, 60, 60, 400, 400, 60, 60, 60.0]))
    sur = TableSurrogate(X, lat, np.full(8, 0.05), rec)
    picks = suggest_profiling(
        sur,
        X,
        30_000,
        latency_limit_log=LAT,
        recovery_limit_log=REC,
        budget_mask=np.ones(8, bool),
        reserved=reserved,
        q=1,
        seed=0,
    )
    assert picks.tolist() == [5]


def test_uncertain_cheaper_candidates_join_the_batch_and_the_budget_is_kept():
    X, reserved = grid()
    lat = np.log(np.array([110, 105, 95, 60, 55, 50, 45, 40.0]))
    std = np.array([0.5, 0.5, 0.5, 0.02, 0.02, 0.02, 0.02, 0.02])  # 0-2: near the limit and unsure
    sur = TableSurrogate(X, lat, std, np.full(8, np.log(60.0)))
    mask = np.array([True, True, True, True, True, False, True, True])
    picks = suggest_profiling(
        sur, X, 30_000, latency_limit_log=LAT, recovery_limit_log=REC, budget_mask=mask, reserved=reserved, q=3, seed=0
    )
    assert len(picks) == 3 and len(set(picks.tolist())) == 3 and mask[picks].all()
    assert set(picks.tolist()) <= {0, 1, 2, 3}, picks  # cheap candidates, not the sure but costly ones
    again = suggest_profiling(
        sur, X, 30_000, latency_limit_log=LAT, recovery_limit_log=REC, budget_mask=mask, reserved=reserved, q=3, seed=0
    )
    assert again.tolist() == picks.tolist()


def test_a_given_reference_point_is_the_hypervolume_reference():
    X, reserved = grid()
    lat = np.log(np.array([160, 150, 140, 60, 55, 50, 45, 40.0]))  # 0-2 likely too slow, 3.. surely fine
    std = np.array([0.3, 0.3, 0.3, 0.02, 0.02, 0.02, 0.02, 0.02])
    sur = TableSurrogate(X, lat, std, np.full(8, np.log(60.0)))
    kw = dict(latency_limit_log=LAT, recovery_limit_log=REC, budget_mask=np.ones(8, bool), reserved=reserved, q=1, seed=0)
    assert suggest_profiling(sur, X, 30_000, **kw).tolist() == [3]  # the cheapest surely feasible one
    # A reference just beyond candidate 2's costs: 3 and the costlier ones add no hypervolume, so the
    # pick is one of the cheap ones, unlikely as they are.
    tight = suggest_profiling(sur, X, 30_000, ref_point=-np.log(reserved[2]) - 1e-3, **kw)
    assert tight.tolist()[0] in (0, 1, 2)


def test_small_and_empty_budgets():
    X, reserved = grid()
    sur = TableSurrogate(X, np.zeros(8), np.ones(8), np.zeros(8))
    kw = dict(latency_limit_log=LAT, recovery_limit_log=REC, reserved=reserved, q=3, seed=0)
    mask = np.zeros(8, bool)
    assert suggest_profiling(sur, X, 1.0, budget_mask=mask, **kw).tolist() == []
    mask[[6, 2]] = True
    assert suggest_profiling(sur, X, 1.0, budget_mask=mask, **kw).tolist() == [2, 6]  # all, cheapest first


@pytest.mark.parametrize(
    "change, match",
    [
        (lambda a: {**a, "X_candidates": np.vstack([a["X_candidates"][:7], a["X_candidates"][:1]])}, "rows 0 and 7 are the same"),
        (lambda a: {**a, "budget_mask": np.ones(7, bool)}, "budget_mask must be a bool array of shape"),
        (lambda a: {**a, "budget_mask": np.ones(8)}, "budget_mask must be a bool array"),
        (lambda a: {**a, "reserved": -a["reserved"]}, "reserved must be"),
        (lambda a: {**a, "q": 0}, "q must be >= 1"),
        (lambda a: {**a, "latency_limit_log": float("nan")}, "latency_limit_log must be finite"),
        (lambda a: {**a, "profiled": [9]}, "profiled indices"),
        (lambda a: {**a, "ref_point": [0.0]}, "ref_point must be 2 finite values"),
        (lambda a: {**a, "ref_point": [0.0, float("inf")]}, "ref_point must be 2 finite values"),
        (lambda a: {**a, "X_candidates": np.where(np.eye(8, 2, dtype=bool), np.nan, a["X_candidates"])}, "row 0 has a NaN"),
    ],
)
def test_bad_input_is_refused(change, match):
    X, reserved = grid()
    sur = TableSurrogate(X, np.zeros(8), np.ones(8), np.zeros(8))
    args = dict(X_candidates=X, budget_mask=np.ones(8, bool), reserved=reserved, q=2)
    args = change(args)
    with pytest.raises(ValueError, match=match):
        suggest_profiling(
            sur, rate=1.0, latency_limit_log=args.pop("latency_limit_log", LAT), recovery_limit_log=REC, seed=0, **args
        )


def test_with_an_rgpe_surrogate_over_the_default_space():
    space = ConfigSpace()
    cands = space.candidates()
    C = np.array([space.normalise(c) for c in cands])
    reserved = np.array([[c.total_cpu, c.total_memory_mb] for c in cands])
    rng = np.random.default_rng(0)

    def truth(X, rate):
        capacity = 20_000 * (1 + 3 * X[:, 0]) * (1 + 0.5 * X[:, 2])
        return np.column_stack([40 * np.exp(1.5 * rate / capacity), 20 + 150 * X[:, 4] * rate / 50_000])

    rows = rng.choice(len(C), 30, replace=False)
    rates = rng.choice([25_000.0, 35_000.0], 30) + rng.uniform(-2_000, 2_000, 30)
    Y = truth(C[rows], rates) * np.exp(rng.normal(0, 0.03, (30, 2)))
    sur = RGPESurrogate(outcomes=("latency_ms", "recovery_s")).fit(C[rows], rates, Y)
    mask = reserved[:, 0] <= 0.5 * reserved[:, 0].max()
    picks = suggest_profiling(
        sur,
        C,
        35_000,
        latency_limit_log=LAT,
        recovery_limit_log=REC,
        budget_mask=mask,
        reserved=reserved,
        q=4,
        seed=1,
        profiled=rows[:3],
    )
    assert len(set(picks.tolist())) == 4 and mask[picks].all()
    # the picks lean cheap and plausible: cheaper than the median budget candidate, mostly feasible
    cost = (reserved / reserved.max(axis=0)).sum(axis=1)
    true = truth(C[picks], np.full(4, 35_000.0))
    assert np.median(cost[picks]) < np.median(cost[mask])
    assert ((true[:, 0] <= 100) & (true[:, 1] <= 180)).sum() >= 2, true
