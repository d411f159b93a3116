"""How far apart are the measured runs of one method? The spread the fidelity targets are held to.

Use it beside ``benchmarks/fidelity/twin_fidelity.py`` before reading a missed replay target as the twin's
error: the targets compare the twin's mean over seeds with the *mean of the measured runs*, and when
a method's runs disagree with each other by more than the target's tolerance, that mean is itself
uncertain by about the tolerance.

    python -m benchmarks.fidelity.measured_spread --data ../shared/data/demeter-ads [--twin demeter:memory=0.758,p95=15.8]

Reads ``summary_per_run.csv`` (the demeter-ads format: one row per run and method; the static
method is ``baseline``) and prints, per method and figure, each run relative to static (the mean
of the static runs), the runs' mean, the standard error of that mean, and whether the error is as
wide as the target's tolerance. CPU and memory are judged on a +-0.08 band (standard error of the
mean of the ratios); latency quantiles on a factor-2 band (the geometric standard error of the mean
of log ratios, as a factor). ``--twin`` adds the twin's figures and says which measured runs each
lies within the tolerance of. Nothing is fitted; any folder in the format runs unchanged.
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path

import numpy as np
import pandas as pd

from benchmarks.fidelity.fidelity_table import TOLERANCES, within_tolerance
from benchmarks.fidelity.measured_folder import METHODS, relative_to_static

__all__ = ["main", "parse_twin", "spread_table"]
_NEEDED = [
    "run",
    "method",
    "cpu_cores_mean",
    "mem_gib_mean",
    "lat_median_ms",
    "lat_p95_ms",
    "lat_p99_ms",
    "n_rec_gt180",
    "n_reconfigs",
]


def _read(data: Path) -> pd.DataFrame:
    f = data / "summary_per_run.csv"
    if not f.is_file():
        raise SystemExit(f"{data}: no summary_per_run.csv (the per-run summary of the measured methods)")
    runs = pd.read_csv(f)
    missing = [c for c in _NEEDED if c not in runs.columns]
    if missing:
        raise SystemExit(f"{f}: missing column(s) {', '.join(missing)}")
    if not (runs["method"] == "baseline").any():
        raise SystemExit(f"{f}: no run of the static method 'baseline' to take the ratios to")
    return runs


def spread_table(data: Path, twin: dict[tuple[str, str], float] | None = None) -> pd.DataFrame:
    """One row per (method, figure) of :data:`TOLERANCES` for each measured method but static: the
    runs relative to static (``runs``, in run order), ``mean``, ``se`` (its standard error: absolute
    for CPU and memory, a factor for latency), ``tolerance``, ``se_over_tolerance`` (the error as a
    share of the tolerance: absolute, or on the log scale) and, with ``twin`` ((policy, figure) ->
    value, policy names as the replay has them), ``twin``, ``meets_mean`` ("yes"/"no": the target
    as the fidelity benchmark judges it, :func:`~benchmarks.fidelity.fidelity_table.within_tolerance`) and ``within_runs`` (the runs, numbered in file order, within
    the tolerance of the twin's value, or "none")."""
    runs = _read(data)
    static = runs[runs["method"] == "baseline"]
    base = static[[c for c in _NEEDED if c not in ("run", "method")]].astype(float).mean()
    names = {m: p for p, m in METHODS.items()}
    rel = relative_to_static(runs.set_index("run"), base).assign(method=runs.set_index("run")["method"])
    rows = []
    for method, grp in rel.groupby("method", sort=False):
        if method == "baseline":
            continue
        policy = names.get(str(method), str(method))
        for fig, (kind, tol) in TOLERANCES.items():
            vals = grp[fig].to_numpy(dtype=float)
            vals = vals[np.isfinite(vals) & (vals > 0)]
            if not len(vals):
                continue
            # The targets compare with the runs' arithmetic mean; latency's error is read on the log scale.
            x = vals if kind == "abs" else np.log(vals)
            se_x = float(x.std(ddof=1) / math.sqrt(len(x))) if len(x) > 1 else float("nan")
            se, share = (se_x, se_x / tol) if kind == "abs" else (math.exp(se_x), se_x / math.log(tol))
            mean = float(vals.mean())
            row = {
                "policy": policy,
                "figure": fig,
                "runs": " / ".join(f"{v:.3g}" for v in vals),
                "n": len(vals),
                "mean": mean,
                "geometric_mean": None if kind == "abs" else float(math.exp(x.mean())),
                "se": se,
                "kind": kind,
                "tolerance": tol,
                "se_over_tolerance": share,
            }
            if twin is not None and (policy, fig) in twin:
                t = twin[(policy, fig)]
                row["twin"] = t
                row["meets_mean"] = "yes" if within_tolerance(fig, t, mean) else "no"
                near = [f"run {i + 1}" for i, v in enumerate(vals) if within_tolerance(fig, t, float(v))]
                row["within_runs"] = ", ".join(near) or "none"
            rows.append(row)
    return pd.DataFrame(rows)


def parse_twin(spec: str) -> dict[tuple[str, str], float]:
    """``"demeter:memory=0.758,p95=15.8;reactive:cpu=0.66"`` -> {(policy, figure): value}."""
    out: dict[tuple[str, str], float] = {}
    for part in filter(None, (p.strip() for p in spec.split(";"))):
        policy, sep, figs = part.partition(":")
        if not sep or not figs:
            raise ValueError(f"--twin: {part!r} is not POLICY:FIGURE=VALUE[,FIGURE=VALUE]")
        for item in figs.split(","):
            fig, eq, val = item.partition("=")
            fig = fig.strip()
            if not eq or fig not in TOLERANCES:
                raise ValueError(f"--twin: {item!r} in {part!r}: the figure must be one of {', '.join(TOLERANCES)}")
            try:
                out[(policy.strip(), fig)] = float(val)
            except ValueError:
                raise ValueError(f"--twin: {item!r} in {part!r}: {val!r} is not a number") from None
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", type=Path, required=True, help="a folder in the demeter-ads format")
    ap.add_argument("--twin", default=None, help="the twin's figures, e.g. 'demeter:memory=0.758,p95=15.8'")
    args = ap.parse_args(argv)
    try:
        twin = parse_twin(args.twin) if args.twin else None
    except ValueError as exc:
        ap.error(str(exc))
    table = spread_table(args.data, twin)
    cols = ["policy", "figure", "runs", "mean", "geometric_mean", "se", "tolerance", "se_over_tolerance"]
    cols += [c for c in ("twin", "meets_mean", "within_runs") if c in table.columns]
    print(f"Measured runs of {args.data} relative to static (se: absolute for cpu/memory, a factor for latency)\n")
    print(table[cols].to_markdown(index=False, floatfmt=".3f"))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
