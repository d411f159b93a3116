"""How well can any twin predict the keeps-up class of real profiling runs? The data's own ceiling.

Use on a ``profiling_runs.csv`` (the demeter-ads format) before blaming a model for a low
keeps-up accuracy (throughput >= 0.95 x input rate):

    python -m benchmarks.fidelity.keeps_up_ceiling --data ../shared/data/demeter-ads

Three measurements, none fitted:

1. ``other_runs``: each row whose configuration was also profiled in another run, predicted from
   those other runs alone (a fell-behind measurement pins the capacity; a kept-up one bounds it
   from below; rows it cannot decide are counted apart). A perfect predictor of the other runs.
2. ``inconsistent``: rows that fell behind although a configuration with no more parallelism and
   no more CPU (same slots, memory, checkpoint interval; any run, this one included) delivered at
   least their rate. Any twin whose throughput is min(rate, capacity) with capacity
   non-decreasing in CPU and parallelism gets these wrong: 1 - their share bounds its accuracy.
3. The recorded rate's own error: rows of one run at the same recorded rate were profiled
   together; ``slot_std`` compares the spread of log(throughput / rate) of kept-up rows within
   such a slot and across all. ``ample_below`` is the share of rows whose capacity is shown to be
   >= 1.1 x their rate (item 2's comparison) that still measured below 0.95 x rate: the recorded
   rate overstated what they were offered. ``ceiling`` = 1 - ample_below x (kept-up share /
   (1 - ample_below)): the accuracy of a twin that knows every capacity exactly but not the rate's error.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import pandas as pd

from flinktune.calibration.grey_box import KEEPS_UP_FACTOR, check_profiling_runs
from flinktune.config_space import KNOBS

__all__ = ["ceiling"]


def _weaker(d: pd.DataFrame, i: int) -> pd.DataFrame:
    r = d.loc[i]
    same = (
        (d["task_slots"] == r["task_slots"])
        & (d["memory_mb"] == r["memory_mb"])
        & (d["checkpoint_interval_s"] == r["checkpoint_interval_s"])
    )
    return d[same & (d.index != i) & (d["parallelism"] <= r["parallelism"]) & (d["cpu"] <= r["cpu"])]


def ceiling(runs: pd.DataFrame, group_by: str = "run") -> dict[str, float]:
    """The figures above for one profiling table (columns of ``profiling_runs.csv``)."""
    d, _ = check_profiling_runs(runs, group_by=group_by)
    rate, thr = d["input_rate"], d["throughput"]
    keep = thr >= KEEPS_UP_FACTOR * rate
    right = decided = undecided = 0
    inconsistent = ample = ample_below = 0
    for i, r in d.iterrows():
        other = d[(d[group_by] != r[group_by]) & (d[list(KNOBS)] == r[list(KNOBS)]).all(axis=1)]
        if len(other):
            behind = other[other["throughput"] < KEEPS_UP_FACTOR * other["input_rate"]]
            if len(behind):
                pred = behind["throughput"].mean() >= KEEPS_UP_FACTOR * r["input_rate"]
            elif other["throughput"].max() >= KEEPS_UP_FACTOR * r["input_rate"]:
                pred = True
            else:
                undecided += 1
                continue
            decided += 1
            right += int(pred == keep[i])
        weaker = _weaker(d, i)
        if len(weaker):
            lower_bound = weaker["throughput"].max()
            inconsistent += int(not keep[i] and lower_bound >= r["input_rate"])
            if lower_bound >= 1.1 * r["input_rate"]:
                ample += 1
                ample_below += int(not keep[i])
    slot = d[group_by].astype(str) + "@" + rate.round(0).astype(str)
    logr = np.log(thr / rate)[keep]
    multi = slot[keep].map(slot[keep].value_counts()) >= 2
    within = (logr - logr.groupby(slot[keep]).transform("mean"))[multi]
    n_slots = slot[keep][multi].nunique()
    p = ample_below / ample if ample else float("nan")
    share = float(keep.mean())
    return {
        "rows": float(len(d)),
        "kept_up_share": share,
        "other_runs_decided": float(decided),
        "other_runs_undecided": float(undecided),
        "other_runs_accuracy": right / decided if decided else float("nan"),
        "inconsistent_rows": float(inconsistent),
        "inconsistent_bound": 1.0 - inconsistent / len(d),
        "slot_std_within": float(np.sqrt((within**2).sum() / max(len(within) - n_slots, 1))) if n_slots else float("nan"),
        "slot_std_all": float(logr.std()),
        "slot_rows": float(multi.sum()),
        "ample_rows": float(ample),
        "ample_below": p,
        "ceiling": 1.0 - p * min(share / (1.0 - p), 1.0) if ample else float("nan"),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", type=Path, required=True, help="A folder with profiling_runs.csv (demeter-ads format).")
    args = ap.parse_args(argv)
    if not (args.data / "profiling_runs.csv").exists():
        ap.error(f"--data {args.data}: no profiling_runs.csv")
    for k, v in ceiling(pd.read_csv(args.data / "profiling_runs.csv")).items():
        print(f"{k}: {v:.4g}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
