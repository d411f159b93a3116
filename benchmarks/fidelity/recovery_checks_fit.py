"""How much backlog Demeter's profiler still reads as recovered: the twin's profiling runs, read with
:class:`flinktune.twin.recovery_checks.RecoveryChecks` at several ``backlog_s``, against the measured
recoveries of a folder's real profiling runs.

Use it to choose ``RecoveryChecks.backlog_s`` (the shipped default came from this on the ADS runs) or
to check it on another workload's folder in the demeter-ads format:

    python -m benchmarks.fidelity.recovery_checks_fit --data ../shared/data/demeter-ads

Every real run (``profiling_runs.csv``, those with a recovery) is replayed once on the twin at its
configuration and rate (``--profile``, the shipped ``ads`` by default; a folder of another job needs
its own, from ``flinktune twin calibrate``), its lag series kept, and read at each ``backlog_s``. Per
value: the share of runs in the measured class (recovery <= ``--limit-s``), the mean relative error
on runs below the cap, and, per checkpoint interval, the share of the runs that kept up (throughput
>= 0.95 x rate) that recovered slowly, twin / measured. The best value by class is marked.
"""

from __future__ import annotations

import argparse
import sys
from importlib import resources
from pathlib import Path

import numpy as np
import pandas as pd

from flinktune.config_space import KNOBS, Configuration
from flinktune.twin.profile import ClusterProfile
from flinktune.twin.profiling import profile_run
from flinktune.twin.recovery_checks import DEMETER_CHECKS, RecoveryChecks, checked_recovery_time

__all__ = ["BACKLOGS_S", "fit_table", "lag_series"]

#: The values tried (seconds of input); infinity is the check without a backlog ceiling.
BACKLOGS_S: tuple[float, ...] = (float("inf"), 120.0, 90.0, 75.0, 60.0, 50.0, 40.0, 30.0)


def lag_series(profile: ClusterProfile, runs: pd.DataFrame, *, duration_s: int = 240) -> list[tuple[np.ndarray, int, float]]:
    """Per row of ``runs`` (knob columns and ``input_rate``): the twin profiling run's per-second lag,
    the fault's index in it and the rate, as :func:`checked_recovery_time` reads them."""
    out: list[tuple[np.ndarray, int, float]] = []

    def keep(lag: np.ndarray, fail_index: int, rate: float) -> float:
        out.append((np.asarray(lag, dtype=float).copy(), int(fail_index), float(rate)))
        return 0.0

    for i, row in runs.reset_index(drop=True).iterrows():
        cfg = Configuration.from_dict({k: row[k] for k in KNOBS}, where=f"profiling run {i}")
        profile_run(profile, cfg, float(row["input_rate"]), duration_s=duration_s, seed=int(i), recovery_measure=keep)
    return out


def fit_table(runs: pd.DataFrame, series: list[tuple[np.ndarray, int, float]], *, limit_s: float = 180.0) -> pd.DataFrame:
    """One row per :data:`BACKLOGS_S` value: ``class_right``, ``mape_below_cap`` and, per checkpoint
    interval ``c``, ``slow_kept_up_c`` as ``"twin / measured"``."""
    rec = runs["recovery_s"].to_numpy(dtype=float)
    below = rec < DEMETER_CHECKS.cap_s
    kept_up = (runs["throughput"] >= 0.95 * runs["input_rate"]).to_numpy()
    rows = []
    for backlog in BACKLOGS_S:
        checks = RecoveryChecks(backlog_s=backlog)
        twin = np.array([checked_recovery_time(lag, i, rate, checks) for lag, i, rate in series])
        row: dict[str, object] = {
            "backlog_s": backlog,
            "class_right": float(np.mean((twin <= limit_s) == (rec <= limit_s))),
            "mape_below_cap": float(np.mean(np.abs(twin[below] - rec[below]) / rec[below])) if below.any() else float("nan"),
        }
        for c in sorted(runs["checkpoint_interval_s"].unique()):
            m = kept_up & (runs["checkpoint_interval_s"] == c).to_numpy()
            if m.any():
                row[f"slow_kept_up_{c:g}s"] = f"{np.mean(twin[m] > limit_s):.2f} / {np.mean(rec[m] > limit_s):.2f} ({m.sum()})"
        rows.append(row)
    return pd.DataFrame(rows)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path, required=True, help="Folder with profiling_runs.csv (the demeter-ads format).")
    ap.add_argument("--profile", type=Path, default=None, help="Twin profile YAML (default: the shipped ads profile).")
    ap.add_argument("--limit-s", type=float, default=180.0, help="Recovery-time limit that splits the classes (s).")
    a = ap.parse_args(argv)
    path = a.data / "profiling_runs.csv"
    if not path.exists():
        ap.error(f"{path} not found: --data must be a folder in the demeter-ads format")
    runs = pd.read_csv(path)
    missing = [c for c in (*KNOBS, "input_rate", "throughput", "recovery_s") if c not in runs.columns]
    if missing:
        ap.error(f"{path}: missing columns {', '.join(missing)}")
    runs = runs.dropna(subset=["recovery_s"]).reset_index(drop=True)
    profile_path = a.profile or Path(str(resources.files("flinktune") / "resources" / "cluster_profile_ads.yaml"))
    print(f"profile {profile_path}; {len(runs)} runs with a recovery; replaying them on the twin", file=sys.stderr, flush=True)
    table = fit_table(runs, lag_series(ClusterProfile.from_yaml(profile_path), runs), limit_s=a.limit_s)
    best = int(table["class_right"].to_numpy().argmax())
    table.insert(0, "best", ["*" if i == best else "" for i in range(len(table))])
    with pd.option_context("display.width", 220, "display.max_columns", 20):
        print(table.round(3).to_string(index=False))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
