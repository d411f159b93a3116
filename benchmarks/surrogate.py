"""Time per decision of the GP surrogate versus the number of profiling observations.

Run: ``.venv/bin/python benchmarks/surrogate.py [--sizes 25 50 100 200] [--repeats 5]``.
For each size, fits a :class:`GPSurrogate` on synthetic observations of the default 840-candidate
space and times scoring all 840 candidates at one rate (what a decision does), best of
``--repeats``. Prints a Markdown table and one JSON line per size. The requirement is well under
1 s per decision with 50-200 observations.
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np

from flinktune.config_space import ConfigSpace
from models.surrogate.gp import GPSurrogate

__all__ = ["main"]


def _outcomes(X: np.ndarray, rate: np.ndarray) -> np.ndarray:
    capacity = 15_000 * (1 + 3 * X[:, 0]) * (1 + 0.5 * X[:, 2])
    return np.column_stack([
        40 * np.exp(1.5 * rate / capacity),
        0.5 + 4 * X[:, 0] * rate / 60_000,
        1000 + 3000 * X[:, 3],
        20 + 150 * X[:, 4] * rate / 60_000,
    ])


def main(argv: list[str] | None = None) -> list[dict]:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sizes", type=int, nargs="+", default=[25, 50, 100, 200])
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--seed", type=int, default=0)
    a = p.parse_args(argv)
    space = ConfigSpace()
    C = np.array([space.normalise(c) for c in space.candidates()])
    rows = []
    for n in a.sizes:
        rng = np.random.default_rng(a.seed + n)
        X = C[rng.choice(len(C), n, replace=n > len(C))]
        rates = rng.uniform(10_000, 60_000, n)
        Y = _outcomes(X, rates) * np.exp(rng.normal(0, 0.05, (n, 4)))
        start = time.perf_counter()
        model = GPSurrogate(seed=a.seed).fit(X, rates, Y)
        fit_s = time.perf_counter() - start
        times = []
        for _ in range(a.repeats):
            start = time.perf_counter()
            model.predict(C, 40_000.0)
            times.append(time.perf_counter() - start)
        rows.append({"observations": n, "fit_s": round(fit_s, 3), "decision_ms": round(1000 * min(times), 1),
                     "decision_ms_median": round(1000 * float(np.median(times)), 1), "candidates": len(C)})
    cols = list(rows[0])
    print("| " + " | ".join(cols) + " |\n|" + "---|" * len(cols))
    for r in rows:
        print("| " + " | ".join(str(r[c]) for c in cols) + " |")
    for r in rows:
        print(json.dumps(r))
    return rows


if __name__ == "__main__":
    main()
