"""Time per decision of the surrogates versus the number of profiling observations (and base models).

Run: ``.venv/bin/python benchmarks/surrogate.py [--kind rgpe|gp] [--sizes 50 200 1000 5000]
[--bases 0 1 3] [--repeats 3] [--device cpu|cuda|auto]``.

``--kind gp``: fits a :class:`GPSurrogate` on synthetic observations of the default 840-candidate
space and times scoring all 840 candidates at one rate (best of ``--repeats``).

``--kind rgpe`` (default): for each size n and number of base models B, n observations over
B + 1 rate buckets, of which the target bucket (the planned rate's) holds min(10, n / (B + 1))
(the case RGPE is for: few runs at the planned rate) and the base buckets share the rest.
Columns: ``fit_s`` (every bucket's GPs, once per new data), ``decision_s`` (rank weights and
scoring all 840 candidates at the planned rate: what a decision does with a fitted surrogate),
``refit_decision_s`` (one more profiling run at the planned rate: refit the target bucket only,
warm-started, then weights and scoring), ``total_s`` = fit + decision; ``*_cpu_s`` is this
process's CPU time for the same step (the honest figure on a shared node). With CUDA present (or ``--device cuda``) the
largest size is also timed on the GPU. Targets (issue 6): at most 1 s per decision at 200
observations and 3 base models on CPU; at least 5x faster on a GPU at 5000 observations.
Prints a Markdown table and one JSON line per row.
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
    return np.column_stack([
        40 * np.exp(1.5 * rate / capacity),
        0.5 + 4 * X[:, 0] * rate / 60_000,
        1000 + 3000 * X[:, 3],
        20 + 150 * X[:, 4] * rate / 60_000,
    ])


def _observations(C: np.ndarray, rng: np.random.Generator, n: int, bases: int) -> tuple[np.ndarray, ...]:
    n_target = min(10, n // (bases + 1)) if bases else n
    counts = [n_target] + ([] if not bases else list(np.diff(np.linspace(0, n - n_target, bases + 1).round().astype(int))))
    X, rates = [], []
    for k, m in enumerate(counts):  # target bucket 2 = [20k, 30k); bases 3, 4, ...
        lo = TARGET_RATE - 5_000 + k * BUCKET
        X.append(C[rng.choice(len(C), m, replace=m > len(C))])
        rates.append(rng.uniform(lo, lo + BUCKET, m))
    X, rates = np.vstack(X), np.concatenate(rates)
    return X, rates, _outcomes(X, rates) * np.exp(rng.normal(0, 0.05, (len(X), 4)))


def _timed(fn):
    """``(result, wall seconds, CPU seconds of this process)``; on a shared node the CPU time is the honest cost."""
    start, cpu = time.perf_counter(), time.process_time()
    out = fn()
    return out, time.perf_counter() - start, time.process_time() - cpu


def bench_rgpe(C: np.ndarray, n: int, bases: int, device: str, seed: int) -> dict:
    rng = np.random.default_rng(seed + n + 1000 * bases)
    X, rates, Y = _observations(C, rng, n, bases)
    model = RGPESurrogate(device=device, seed=seed)
    _, fit_s, fit_cpu = _timed(lambda: model.fit(X, rates, Y))
    _, decision_s, decision_cpu = _timed(lambda: model.predict(C, TARGET_RATE))
    _, again_s, _ = _timed(lambda: model.predict(C, TARGET_RATE))
    x1 = C[rng.integers(len(C))][None]
    y1 = _outcomes(x1, np.array([TARGET_RATE]))
    _, refit_s, refit_cpu = _timed(lambda: model.fit(np.vstack([X, x1]), np.append(rates, TARGET_RATE), np.vstack([Y, y1])).predict(C, TARGET_RATE))
    w = model.weights(TARGET_RATE)["latency_ms"]
    return {"kind": "rgpe", "device": device, "observations": n, "base_models": bases, "target_points": w["target_points"],
            "fit_s": round(fit_s, 3), "fit_cpu_s": round(fit_cpu, 3),
            "decision_s": round(decision_s, 3), "decision_cpu_s": round(decision_cpu, 3), "scoring_only_s": round(again_s, 3),
            "refit_decision_s": round(refit_s, 3), "refit_decision_cpu_s": round(refit_cpu, 3),
            "total_s": round(fit_s + decision_s, 3), "total_cpu_s": round(fit_cpu + decision_cpu, 3),
            "latency_weights": w.get("weights", w.get("reason"))}


def bench_gp(C: np.ndarray, n: int, repeats: int, seed: int) -> dict:
    rng = np.random.default_rng(seed + n)
    X = C[rng.choice(len(C), n, replace=n > len(C))]
    rates = rng.uniform(10_000, 60_000, n)
    Y = _outcomes(X, rates) * np.exp(rng.normal(0, 0.05, (n, 4)))
    model, fit_s, _ = _timed(lambda: GPSurrogate(seed=seed).fit(X, rates, Y))
    times = [_timed(lambda: model.predict(C, 40_000.0))[1] for _ in range(repeats)]
    return {"kind": "gp", "observations": n, "fit_s": round(fit_s, 3), "decision_ms": round(1000 * min(times), 1),
            "decision_ms_median": round(1000 * float(np.median(times)), 1), "candidates": len(C)}


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
    p.add_argument("--repeats", type=int, default=3)
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
        for n in sizes:
            for b in a.bases:
                rows.append(bench_rgpe(C, n, b, a.device, a.seed))
                print(json.dumps(rows[-1], default=str), flush=True)
        if a.device == "cpu" and torch.cuda.is_available():
            rows.append(bench_rgpe(C, max(sizes), max(a.bases), "cuda", a.seed))
            cpu = next(r for r in rows if r["observations"] == max(sizes) and r["base_models"] == max(a.bases))
            rows[-1]["speedup_vs_cpu"] = round(cpu["total_s"] / max(rows[-1]["total_s"], 1e-9), 1)
    _print(rows)
    return rows


if __name__ == "__main__":
    main()
