"""Time per decision of the surrogates versus the number of profiling observations (and base models).

Run: ``.venv/bin/python -m benchmarks.scale.surrogate [--kind rgpe|gp] [--sizes 50 200 1000 5000]
[--bases 0 1 3] [--repeats 5] [--device cpu|cuda|auto]``.

``--kind gp``: fits a :class:`GPSurrogate` on synthetic observations of the default 840-candidate
space and times scoring all 840 candidates at one rate (best of ``--repeats``).

``--kind rgpe`` (default): for each size n and number of base models B, n observations over
B + 1 rate buckets, of which the target bucket (the planned rate's) holds min(10, n / (B + 1))
(the case RGPE is for: few runs at the planned rate) and the base buckets share the rest.
Each repeat builds a *new* surrogate on the same data, so nothing is cached between repeats.
Columns (median over ``--repeats``):

- ``fit_s``: cold fit, every GP of every bucket fitted from its default start (4 outcomes x
  (B + 1) buckets, one batched fit); no model is reused.
- ``decision_s``: rank weights and scoring all 840 candidates at the planned rate with the
  freshly fitted surrogate.
- ``total_s`` = fit + decision: a decision from scratch, what the target bounds.
- ``refit_decision_s``: one more profiling run at the planned rate, then a decision: only the
  target bucket's GPs are refitted (warm-started from their last fit), base-bucket GPs are
  reused because their data did not change; weights and scoring as above.
- ``*_cpu_s``: this process's CPU time for the same step (the honest figure on a shared node);
  ``total_max_s``: the slowest repeat's total.

Before the table one small fit and decision warm the process up (imports, first-call set-up of
torch/gpytorch); its time is printed as ``warm-up`` and is not in the table: a fresh process
pays it once. With CUDA present (or ``--device cuda``) the largest size is also timed on the
GPU. Targets: at most 1 s per decision at 200 observations and 3 base models on CPU;
at least 5x faster on a GPU at 5000 observations. Prints a Markdown table and one JSON line per
row.
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np
import torch

from flinktune.config_space import ConfigSpace
from models.surrogate.gp import GPSurrogate
from models.surrogate.rgpe_surrogate import RGPESurrogate

__all__ = ["main"]

BUCKET = 10_000.0
TARGET_RATE = 25_000.0


def _outcomes(X: np.ndarray, rate: np.ndarray) -> np.ndarray:
    capacity = 15_000 * (1 + 3 * X[:, 0]) * (1 + 0.5 * X[:, 2])
    return np.column_stack(
        [
            40 * np.exp(1.5 * rate / capacity),
            0.5 + 4 * X[:, 0] * rate / 60_000,
            1000 + 3000 * X[:, 3],
            20 + 150 * X[:, 4] * rate / 60_000,
        ]
    )


def _observations(C: np.ndarray, rng: np.random.Generator, n: int, bases: int) -> tuple[np.ndarray, ...]:
    n_target = min(10, n // (bases + 1)) if bases else n
    counts = [n_target] + ([] if not bases else list(np.diff(np.linspace(0, n - n_target, bases + 1).round().astype(int))))
    xs, rs = [], []
    for k, m in enumerate(counts):  # target bucket 2 = [20k, 30k); bases 3, 4, ...
        lo = TARGET_RATE - 5_000 + k * BUCKET
        xs.append(C[rng.choice(len(C), m, replace=m > len(C))])
        rs.append(rng.uniform(lo, lo + BUCKET, m))
    X, rates = np.vstack(xs), np.concatenate(rs)
    return X, rates, _outcomes(X, rates) * np.exp(rng.normal(0, 0.05, (len(X), 4)))


def _warmup_data(C: np.ndarray) -> tuple[tuple[np.ndarray, ...], tuple[np.ndarray, ...]]:
    rng = np.random.default_rng(12345)
    data = _observations(C, rng, 40, 1)
    x1 = C[:1]
    return data, (x1, np.array([TARGET_RATE]), _outcomes(x1, np.array([TARGET_RATE])))


def _timed(fn):
    """``(result, wall seconds, CPU seconds of this process)``; on a shared node the CPU time is the honest cost."""
    start, cpu = time.perf_counter(), time.process_time()
    out = fn()
    return out, time.perf_counter() - start, time.process_time() - cpu


def _rgpe_once(C: np.ndarray, data: tuple[np.ndarray, ...], extra: tuple[np.ndarray, ...], device: str, seed: int) -> dict:
    X, rates, Y = data
    model = RGPESurrogate(device=device, seed=seed)
    _, fit_s, fit_cpu = _timed(lambda: model.fit(X, rates, Y))
    _, decision_s, decision_cpu = _timed(lambda: model.predict(C, TARGET_RATE))
    _, again_s, _ = _timed(lambda: model.predict(C, TARGET_RATE))
    more = tuple(np.concatenate([a, b]) for a, b in zip(data, extra))
    _, refit_s, refit_cpu = _timed(lambda: model.fit(*more).predict(C, TARGET_RATE))
    return {
        "fit_s": fit_s,
        "fit_cpu_s": fit_cpu,
        "decision_s": decision_s,
        "decision_cpu_s": decision_cpu,
        "scoring_only_s": again_s,
        "refit_decision_s": refit_s,
        "refit_decision_cpu_s": refit_cpu,
        "total_s": fit_s + decision_s,
        "total_cpu_s": fit_cpu + decision_cpu,
        "gp_not_converged": model.fit_info.get("gp_not_converged", 0.0),
        "weights": model.weights(TARGET_RATE)["latency_ms"],
    }


def bench_rgpe(C: np.ndarray, n: int, bases: int, device: str, seed: int, repeats: int = 3) -> dict:
    rng = np.random.default_rng(seed + n + 1000 * bases)
    data = _observations(C, rng, n, bases)
    x1 = C[rng.integers(len(C))][None]
    extra = (x1, np.array([TARGET_RATE]), _outcomes(x1, np.array([TARGET_RATE])))
    runs = [_rgpe_once(C, data, extra, device, seed) for _ in range(max(1, repeats))]
    med = {k: round(float(np.median([r[k] for r in runs])), 3) for k in runs[0] if k.endswith("_s")}
    w = runs[-1]["weights"]
    return {
        "kind": "rgpe",
        "device": device,
        "observations": n,
        "base_models": bases,
        "target_points": w["target_points"],
        "repeats": len(runs),
        **{
            k: med[k]
            for k in (
                "fit_s",
                "fit_cpu_s",
                "decision_s",
                "decision_cpu_s",
                "scoring_only_s",
                "refit_decision_s",
                "refit_decision_cpu_s",
                "total_s",
                "total_cpu_s",
            )
        },
        "total_max_s": round(max(r["total_s"] for r in runs), 3),
        "gp_not_converged": max(r["gp_not_converged"] for r in runs),
        "latency_weights": w.get("weights", w.get("reason")),
    }


def bench_gp(C: np.ndarray, n: int, repeats: int, seed: int) -> dict:
    rng = np.random.default_rng(seed + n)
    X = C[rng.choice(len(C), n, replace=n > len(C))]
    rates = rng.uniform(10_000, 60_000, n)
    Y = _outcomes(X, rates) * np.exp(rng.normal(0, 0.05, (n, 4)))
    model, fit_s, _ = _timed(lambda: GPSurrogate(seed=seed).fit(X, rates, Y))
    times = [_timed(lambda: model.predict(C, 40_000.0))[1] for _ in range(repeats)]
    return {
        "kind": "gp",
        "observations": n,
        "fit_s": round(fit_s, 3),
        "decision_ms": round(1000 * min(times), 1),
        "decision_ms_median": round(1000 * float(np.median(times)), 1),
        "candidates": len(C),
    }


def _print(rows: list[dict]) -> None:
    cols = list(dict.fromkeys(k for r in rows for k in r))
    print("| " + " | ".join(cols) + " |\n|" + "---|" * len(cols))
    for r in rows:
        print("| " + " | ".join(str(r.get(c, "")) for c in cols) + " |")
    for r in rows:
        print(json.dumps(r, default=str))


def main(argv: list[str] | None = None) -> list[dict]:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--kind", choices=["rgpe", "gp"], default="rgpe")
    p.add_argument("--sizes", type=int, nargs="+", default=None)
    p.add_argument("--bases", type=int, nargs="+", default=[0, 1, 3])
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--device", choices=["cpu", "cuda", "auto"], default="cpu")
    p.add_argument("--seed", type=int, default=0)
    a = p.parse_args(argv)
    space = ConfigSpace()
    C = np.array([space.normalise(c) for c in space.candidates()])
    rows: list[dict] = []
    if a.kind == "gp":
        for n in a.sizes or [25, 50, 100, 200]:
            rows.append(bench_gp(C, n, a.repeats, a.seed))
    else:
        sizes = a.sizes or [50, 200, 1000, 5000]
        _, warm_s, warm_cpu = _timed(lambda: _rgpe_once(C, *_warmup_data(C), a.device, a.seed))
        print(
            f"warm-up (first fit and decision in this process, not in the table): {warm_s:.3f} s, CPU {warm_cpu:.3f} s",
            flush=True,
        )
        for n in sizes:
            for b in a.bases:
                rows.append(bench_rgpe(C, n, b, a.device, a.seed, a.repeats))
                print(json.dumps(rows[-1], default=str), flush=True)
        if a.device == "cpu" and torch.cuda.is_available():
            _rgpe_once(C, *_warmup_data(C), "cuda", a.seed)
            rows.append(bench_rgpe(C, max(sizes), max(a.bases), "cuda", a.seed, a.repeats))
            cpu = next(r for r in rows if r["observations"] == max(sizes) and r["base_models"] == max(a.bases))
            rows[-1]["speedup_vs_cpu"] = round(cpu["total_s"] / max(rows[-1]["total_s"], 1e-9), 1)
    _print(rows)
    return rows


if __name__ == "__main__":
    main()
