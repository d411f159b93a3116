"""RGPE versus a plain GP: simple regret of Bayesian optimisation on synthetic related tasks.

Run: ``.venv/bin/python benchmarks/rgpe_regret.py [--seeds 20] [--iterations 10] [--init 3]``.

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
"""

from __future__ import annotations

import argparse
import json
import time
import warnings

import numpy as np
import torch
from scipy.stats import wilcoxon

from models.surrogate.rgpe_surrogate import RGPESurrogate

__all__ = ["main", "run_seed"]

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
    acq = LogExpectedImprovement(m, best_f=-best, posterior_transform=ScalarizedPosteriorTransform(torch.tensor([-1.0], dtype=torch.float64)))
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
    yb = np.concatenate([f(Xb[i * 25:(i + 1) * 25], s) for i, s in enumerate(BASE_SHIFTS)]) + rng.normal(0, 0.03, len(Xb))
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


def main(argv: list[str] | None = None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seeds", type=int, default=20)
    p.add_argument("--iterations", type=int, default=10)
    p.add_argument("--init", type=int, default=3)
    p.add_argument("--no-dilution", action="store_true", help="RGPE without weight-dilution pruning")
    a = p.parse_args(argv)
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
            print(json.dumps({"seed": s, "gp_final": round(gp["regret"][-1], 4), "rgpe_final": round(rg["regret"][-1], 4)}), flush=True)
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
        "seeds": a.seeds, "iterations": a.iterations, "dilution_points": dil,
        "final_mean": {"gp": float(final_g.mean()), "rgpe": float(final_r.mean())},
        "final_median": {"gp": float(np.median(final_g)), "rgpe": float(np.median(final_r))},
        "rgpe_wins_ties_losses": [int((final_r < final_g - 1e-9).sum()), int((np.abs(final_r - final_g) <= 1e-9).sum()),
                                  int((final_r > final_g + 1e-9).sum())],
        "wilcoxon_p_final": test(final_g, final_r),
        "wilcoxon_p_summed_regret": test(area_g, area_r),
        "mean_weight_by_bucket": {b: float(np.mean([r["weights"].get(b, 0.0) for r in runs])) for b in ["3", "4", "5", "target"]},
        "seconds": round(time.perf_counter() - start, 1),
    }
    print("\n| metric | plain GP | RGPE |\n|---|---|---|")
    print(f"| final regret, mean | {final_g.mean():.4f} | {final_r.mean():.4f} |")
    print(f"| final regret, median | {np.median(final_g):.4f} | {np.median(final_r):.4f} |")
    print(f"| regret summed over evaluations, mean | {area_g.mean():.4f} | {area_r.mean():.4f} |")
    print(f"\nRGPE wins/ties/losses (final): {summary['rgpe_wins_ties_losses']}; one-sided paired Wilcoxon "
          f"p = {summary['wilcoxon_p_final']:.4g} (final), {summary['wilcoxon_p_summed_regret']:.4g} (summed)")
    print(f"mean latency weight by bucket (3 = closest): {summary['mean_weight_by_bucket']}")
    print(json.dumps(summary))
    return summary


if __name__ == "__main__":
    main()
