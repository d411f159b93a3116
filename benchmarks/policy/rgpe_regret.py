"""RGPE versus a plain GP: simple regret of Bayesian optimisation on synthetic related tasks.

Run: ``.venv/bin/python -m benchmarks.policy.rgpe_regret [--seeds 20] [--iterations 10] [--init 3]``.

Tasks are one function shifted by rate: in log-latency units,
``f(x, r) = 1.5 * ||x - c0 - 0.1 r u||^2 + 0.3 sin(5 x_0) + 0.2 r`` over x in [0, 1]^4, with a
random centre ``c0`` and shift direction ``u`` per seed. Base tasks are three rate buckets
(r = 1, 2, 3: 35k, 45k, 55k rec/s) with 25 noisy observations each; the target is r = 0
(25k rec/s). Both methods run the same loop on the same 400 random candidates from the same
``--init`` random target points: fit an :class:`RGPESurrogate` (the plain GP is the same class
given the target observations only, so it is the target GP alone), pick the candidate with the
largest analytic LogEI for minimisation, observe it (noise sd 0.03). Simple regret = the true
``f`` of the best point observed so far minus the best candidate's.

Prints per-iteration mean regret, the final regret per method (mean, median), wins/ties/losses
of RGPE, a one-sided paired Wilcoxon signed-rank test on the final regret and on the regret
summed over iterations, and RGPE's mean latency weight per base bucket at the end (closest
first). One JSON line per seed follows the table.

``--transfer`` runs the fleet question instead (issue: cross-job transfer): a *new* job on the twin,
BO over the real configuration space, with RGPE base models taken from (a) nothing, (b) the new
job's own profiling at three other rates (what Demeter transfers; those runs are the new job's
own cost), (c) three *other* jobs of the same kind (ysb-like twins with other cost, queueing, GC
and checkpoint parameters, seeded) profiled at the new job's rate (free: the fleet already has
them). See :func:`run_transfer_seed` for the objective; it prints profiling runs to get within 5 %
of the best candidate's cost and the final regret per arm, mean and worst over seeds.
"""

from __future__ import annotations

import argparse
import json
import time
import warnings
from typing import Any, cast

import numpy as np
import torch
from scipy.stats import wilcoxon

from flinktune.pricing import PriceList
from models.surrogate.rgpe_surrogate import RGPESurrogate

__all__ = ["main", "run_seed", "run_transfer_seed", "transfer_main"]

D = 4
TARGET_RATE = 25_000.0
BASE_SHIFTS = (1, 2, 3)


def task(rng: np.random.Generator):
    """``f(x, r)`` for one seed: the optimum moves by 0.1 * r along a random direction."""
    c0 = rng.uniform(0.25, 0.55, D)
    u = rng.normal(size=D)
    u /= np.linalg.norm(u)

    def f(x: np.ndarray, r: float) -> np.ndarray:
        return 1.5 * ((x - c0 - 0.1 * r * u) ** 2).sum(axis=1) + 0.3 * np.sin(5 * x[:, 0]) + 0.2 * r

    return f


def _pick(model: RGPESurrogate, cands: np.ndarray, seen: set[int], best: float) -> int:
    from botorch.acquisition.analytic import LogExpectedImprovement
    from botorch.acquisition.objective import ScalarizedPosteriorTransform

    m = model.outcome_model("latency_ms", TARGET_RATE)
    acq = LogExpectedImprovement(
        m, best_f=-best, posterior_transform=ScalarizedPosteriorTransform(torch.tensor([-1.0], dtype=torch.float64))
    )
    with torch.no_grad():
        vals = acq(torch.as_tensor(cands).unsqueeze(-2)).numpy()
    vals[list(seen)] = -np.inf
    return int(np.argmax(vals))


def run_seed(seed: int, iterations: int, init: int, *, use_bases: bool, dilution_points: int | None = 20) -> dict:
    """One BO run; returns the regret after each evaluation beyond the initial design and the final weights."""
    rng = np.random.default_rng(seed)
    f = task(rng)
    cands = rng.random((400, D))
    f_best = float(f(cands, 0).min())
    Xb = rng.random((25 * len(BASE_SHIFTS), D))
    rb = np.repeat([TARGET_RATE + 10_000 * s for s in BASE_SHIFTS], 25)
    yb = np.concatenate([f(Xb[i * 25 : (i + 1) * 25], s) for i, s in enumerate(BASE_SHIFTS)]) + rng.normal(0, 0.03, len(Xb))
    chosen = list(rng.choice(len(cands), init, replace=False))
    noise = np.random.default_rng(seed + 10_000)  # same observation noise for both methods
    obs = {i: float(f(cands[[i]], 0)[0] + noise.normal(0, 0.03)) for i in chosen}
    model = RGPESurrogate(outcomes=("latency_ms",), seed=seed, dilution_points=dilution_points)
    regret = []
    for _ in range(iterations):
        Xt = cands[list(obs)]
        yt = np.array(list(obs.values()))
        X = np.vstack([Xb, Xt]) if use_bases else Xt
        rates = np.concatenate([rb, np.full(len(Xt), TARGET_RATE)]) if use_bases else np.full(len(Xt), TARGET_RATE)
        y = np.concatenate([yb, yt]) if use_bases else yt
        model.fit(X, rates, np.exp(y)[:, None])  # latency_ms is modelled as log: model space = f
        i = _pick(model, cands, set(obs), float(yt.min()))
        obs[i] = float(f(cands[[i]], 0)[0] + noise.normal(0, 0.03))
        true_best = float(f(cands[list(obs)], 0).min())
        regret.append(true_best - f_best)
    w = model.weights(TARGET_RATE)["latency_ms"]
    return {"seed": seed, "regret": regret, "weights": w.get("weights", {})}


# --- cross-job transfer on the twin ---------------------------------------------------------------
TRANSFER_RATE = 40_000.0
LATENCY_TARGET_MS = 1000.0
RECOVERY_LIMIT_S = 180.0
# A GiB-hour in vCPU-hours on the default price list (flinktune.pricing; about 0.11).
GIB_PER_CORE_PRICE = PriceList.model_fields["memory_gib_hour"].default / PriceList.model_fields["cpu_core_hour"].default
ARMS = ("none", "own-rates", "other-jobs")


def _job_profile(rng: np.random.Generator):
    """A ysb-like job: the built-in profile with seeded per-job cost, queueing, GC and checkpoint traits."""
    from flinktune.calibration.mechanism import apply_params
    from flinktune.twin.profile import ClusterProfile

    return apply_params(
        ClusterProfile.default(),
        {
            "cost_scale": rng.uniform(0.8, 1.25),
            "queue_ms": rng.uniform(35.0, 70.0),
            "gc_slowdown": rng.uniform(1.0, 2.0),
            "checkpoint_upload_mb_s": rng.uniform(18.0, 35.0),
        },
    )


def slack(profile, configs, rate: float) -> np.ndarray:
    """(n, 2) log of p95 latency over its target and recovery time over its limit, from the twin's steady state.

    A configuration is feasible when both are <= 0. Each is capped at ``log 5``: an overloaded run's
    latency grows without bound, and how far past the goal it is tells the search nothing more.
    """
    from flinktune.twin.mechanics import steady_state

    out = np.empty((len(configs), 2))
    for i, c in enumerate(configs):
        ss = steady_state(profile, c, np.array([rate]))
        out[i] = np.log([ss["latency_ms"][0] / LATENCY_TARGET_MS, ss["recovery_s"][0] / RECOVERY_LIMIT_S])
    return np.minimum(out, np.log(5.0))


def priced_cost(configs) -> np.ndarray:
    """Known before any run: cores + GiB reserved x :data:`GIB_PER_CORE_PRICE` (the default price list, in cores)."""
    return np.array([c.total_cpu + GIB_PER_CORE_PRICE * c.total_memory_mb / 1024.0 for c in configs])


def _gp(x: np.ndarray, y: np.ndarray, seed: int):
    from models.surrogate.gp import fit_gp

    return fit_gp(torch.as_tensor(x), torch.as_tensor(y).reshape(-1, 1), seed=seed)


def _regret(cost: np.ndarray, feasible: np.ndarray, seen: list[int]) -> float:
    """log(cost of the cheapest feasible configuration profiled / the cheapest feasible one); log 2 if none yet."""
    found = [cost[i] for i in seen if feasible[i]]
    return float(np.log(min(found) / cost[feasible].min())) if found else float(np.log(2.0))


def run_transfer_seed(seed: int, iterations: int, init: int, arm: str, *, n_cands: int = 300, base_points: int = 25) -> dict:
    """One constrained BO run of a new job with base models from ``arm``: regret after each profiling run.

    The cost of a configuration is known (what it reserves); what a profiling run teaches is
    whether it meets the latency target and the recovery limit. Per goal an RGPE ensemble (base GPs
    from ``arm``'s sources, the target GP on the new job's runs so far) predicts the slack; the next
    run is the candidate with the largest expected improvement in cost times its probability of
    meeting both goals (before any feasible run: the most probably feasible one, cheaper first).
    """
    from scipy.stats import norm

    from flinktune.config_space import ConfigSpace, spread_design
    from models.surrogate.rgpe import RGPEModel, compute_rank_weights

    rng = np.random.default_rng(seed)
    space = ConfigSpace()
    every = space.candidates()
    configs = [every[i] for i in rng.choice(len(every), min(n_cands, len(every)), replace=False)]
    X = np.array([space.normalise(c) for c in configs])
    cost = priced_cost(configs)
    new, others = _job_profile(rng), [_job_profile(rng) for _ in range(3)]
    truth = slack(new, configs, TRANSFER_RATE)
    # numpy types all(axis=...) as a scalar or an array; truth is 2-D, so it is an array
    feasible = cast(np.ndarray, (truth <= 0).all(axis=1))
    noise = np.random.default_rng(seed + 10_000)  # the same observation noise for every arm
    if arm == "own-rates":
        sources = [(new, TRANSFER_RATE + d) for d in (-10_000.0, 10_000.0, 20_000.0)]
    elif arm == "other-jobs":
        sources = [(job, TRANSFER_RATE) for job in others]
    else:
        sources = []
    bases: list[list] = [[], []]  # per goal
    for k, (profile, rate) in enumerate(sources):
        rows = rng.choice(len(configs), base_points, replace=False)
        y = slack(profile, [configs[i] for i in rows], rate) + noise.normal(0, 0.03, (base_points, 2))
        for g in range(2):
            bases[g].append(_gp(X[rows], y[:, g], seed + k))
    # The product's start-up design: spread over the space, opening on the most expensive candidate
    # (the one most likely to meet the goals), so every arm starts from the same informative runs.
    design = spread_design(space, configs, init, seed, first=lambda cs: int(np.argmax(priced_cost(cs))))
    seen = [configs.index(c) for c in design]
    measured = {i: truth[i] + noise.normal(0, 0.03, 2) for i in seen}
    regret, weights = [], {}
    for it in range(iterations):
        y = np.array([measured[i] for i in seen])
        p_ok = np.ones(len(configs))
        for g in range(2):
            target = _gp(X[seen], y[:, g], seed)
            w = compute_rank_weights(bases[g], target, seed=seed + it).weights if bases[g] else torch.ones(1, dtype=torch.float64)
            if g == 0:
                weights = {f"base{j}": round(float(v), 3) for j, v in enumerate(w[:-1])} | {"target": round(float(w[-1]), 3)}
            with torch.no_grad():
                post = RGPEModel([*bases[g], target], w).posterior(torch.as_tensor(X).unsqueeze(-2))
                mu, sd = post.mean.reshape(-1).numpy(), post.variance.reshape(-1).clamp_min(1e-12).sqrt().numpy()
            p_ok *= norm.cdf(-mu / sd)
        ok_seen = [cost[i] for i in seen if (measured[i] <= 0).all()]
        score = (min(ok_seen) - cost).clip(min=0) * p_ok if ok_seen else p_ok - 1e-6 * cost
        score[seen] = -np.inf
        pick = int(np.argmax(score))
        seen.append(pick)
        measured[pick] = truth[pick] + noise.normal(0, 0.03, 2)
        regret.append(_regret(cost, feasible, seen))
    return {"seed": seed, "arm": arm, "regret": regret, "weights": weights}


def _transfer_run(args: tuple[int, int, int, str]) -> dict:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # jitter notes from gpytorch
        return run_transfer_seed(*args)


def transfer_main(seeds: int, iterations: int, init: int, tolerance: float = 0.05, workers: int = 1) -> dict:
    """Every arm on every seed (``workers`` processes); runs-to-tolerance and final regret per arm (mean and worst)."""
    from concurrent.futures import ProcessPoolExecutor

    start = time.perf_counter()
    tasks = [(s, iterations, init, arm) for s in range(seeds) for arm in ARMS]
    if workers > 1:
        with ProcessPoolExecutor(workers) as pool:
            results = list(pool.map(_transfer_run, tasks))
    else:
        results = [_transfer_run(t) for t in tasks]
    runs: dict[str, list[list[float]]] = {a: [] for a in ARMS}
    for r in results:
        runs[r["arm"]].append(r["regret"])
    for s in range(seeds):
        print(json.dumps({"seed": s, **{arm: round(runs[arm][s][-1], 4) for arm in ARMS}}), flush=True)

    def runs_to(reg: list[float]) -> int:
        hit = [k for k, v in enumerate(reg) if v <= tolerance]
        return init + (hit[0] + 1 if hit else len(reg) + 1)  # not reached: counted as one more than the budget

    print(
        f"\nNew job at {TRANSFER_RATE:,.0f} rec/s, {seeds} seeds, {init} initial + {iterations} BO profiling runs; "
        f"regret = log(cheapest feasible found / cheapest feasible), tolerance {tolerance}\n"
    )
    print(
        "| base models | new job's runs for the bases | BO runs to within 5 %, mean | worst | reached | final regret, mean | worst |\n"
        "|---|---|---|---|---|---|---|"
    )
    summary: dict[str, Any] = {"seeds": seeds, "iterations": iterations, "init": init, "tolerance": tolerance, "arms": {}}
    for arm in ARMS:
        R = np.array(runs[arm])
        n = np.array([runs_to(list(r)) for r in R])
        reached = int((R.min(axis=1) <= tolerance).sum())
        summary["arms"][arm] = {
            "runs_mean": float(n.mean()),
            "runs_worst": int(n.max()),
            "reached": reached,
            "final_mean": float(R[:, -1].mean()),
            "final_worst": float(R[:, -1].max()),
        }
        a = summary["arms"][arm]
        own = 3 * 25 if arm == "own-rates" else 0  # run_transfer_seed's base_points per source
        print(
            f"| {arm} | {own} | {a['runs_mean']:.1f} | {a['runs_worst']} | {reached}/{seeds} | {a['final_mean']:.4f} | {a['final_worst']:.4f} |"
        )
    summary["seconds"] = round(time.perf_counter() - start, 1)
    print(json.dumps(summary))
    return summary


def main(argv: list[str] | None = None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seeds", type=int, default=20)
    p.add_argument("--iterations", type=int, default=10)
    p.add_argument("--init", type=int, default=3)
    p.add_argument("--no-dilution", action="store_true", help="RGPE without weight-dilution pruning")
    p.add_argument("--transfer", action="store_true", help="cross-job transfer for a new twin job (module doc)")
    p.add_argument("--workers", type=int, default=1, help="--transfer: processes to run the seeds and arms in")
    a = p.parse_args(argv)
    if a.seeds < 1 or a.iterations < 1 or a.init < 3:
        p.error("--seeds and --iterations must be >= 1 and --init >= 3 (rank weights need 3 target points)")
    if a.transfer:
        return transfer_main(a.seeds, a.iterations, a.init, workers=max(1, a.workers))
    if a.seeds < 2:
        p.error("--seeds must be >= 2 for a paired test")
    dil = None if a.no_dilution else 20
    start = time.perf_counter()
    runs = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # jitter and input-matches-training notes from gpytorch
        for s in range(a.seeds):
            gp = run_seed(s, a.iterations, a.init, use_bases=False, dilution_points=dil)
            rg = run_seed(s, a.iterations, a.init, use_bases=True, dilution_points=dil)
            runs.append({"seed": s, "gp": gp["regret"], "rgpe": rg["regret"], "weights": rg["weights"]})
            print(
                json.dumps({"seed": s, "gp_final": round(gp["regret"][-1], 4), "rgpe_final": round(rg["regret"][-1], 4)}),
                flush=True,
            )
    G = np.array([r["gp"] for r in runs])
    R = np.array([r["rgpe"] for r in runs])
    print(f"\nSimple regret (f units), {a.seeds} seeds, {a.init} initial points, dilution_points={dil}\n")
    print("| evaluation | plain GP mean | RGPE mean |\n|---|---|---|")
    for k in range(a.iterations):
        print(f"| {a.init + k + 1} | {G[:, k].mean():.4f} | {R[:, k].mean():.4f} |")
    final_g, final_r = G[:, -1], R[:, -1]
    area_g, area_r = G.sum(axis=1), R.sum(axis=1)

    def test(x, y):
        diff = x - y
        return float(wilcoxon(y, x, alternative="less").pvalue) if np.any(np.abs(diff) > 1e-12) else 1.0

    summary = {
        "seeds": a.seeds,
        "iterations": a.iterations,
        "dilution_points": dil,
        "final_mean": {"gp": float(final_g.mean()), "rgpe": float(final_r.mean())},
        "final_median": {"gp": float(np.median(final_g)), "rgpe": float(np.median(final_r))},
        "rgpe_wins_ties_losses": [
            int((final_r < final_g - 1e-9).sum()),
            int((np.abs(final_r - final_g) <= 1e-9).sum()),
            int((final_r > final_g + 1e-9).sum()),
        ],
        "wilcoxon_p_final": test(final_g, final_r),
        "wilcoxon_p_summed_regret": test(area_g, area_r),
        "mean_weight_by_bucket": {b: float(np.mean([r["weights"].get(b, 0.0) for r in runs])) for b in ["3", "4", "5", "target"]},
        "seconds": round(time.perf_counter() - start, 1),
    }
    print("\n| metric | plain GP | RGPE |\n|---|---|---|")
    print(f"| final regret, mean | {final_g.mean():.4f} | {final_r.mean():.4f} |")
    print(f"| final regret, median | {np.median(final_g):.4f} | {np.median(final_r):.4f} |")
    print(f"| regret summed over evaluations, mean | {area_g.mean():.4f} | {area_r.mean():.4f} |")
    print(
        f"\nRGPE wins/ties/losses (final): {summary['rgpe_wins_ties_losses']}; one-sided paired Wilcoxon "
        f"p = {summary['wilcoxon_p_final']:.4g} (final), {summary['wilcoxon_p_summed_regret']:.4g} (summed)"
    )
    print(f"mean latency weight by bucket (3 = closest): {summary['mean_weight_by_bucket']}")
    print(json.dumps(summary))
    return summary


if __name__ == "__main__":
    main()
