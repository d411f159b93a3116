"""Calibrate the twin against the local Flink cluster and report its held-out error.

    # a profiling sweep on a fresh local cluster (parallelism x rates), then calibration:
    .venv/bin/python -m benchmarks.localflink.calibration --sweep --rates 3000,9000,15000
    # or calibrate from observations already measured (e.g. by benchmarks/localflink/loop.py):
    .venv/bin/python -m benchmarks.localflink.calibration --observations var/localflink/loop/observations.csv
    # fit on the loop's profiling steps, score on its steady loop rows (another kind of run):
    .venv/bin/python -m benchmarks.localflink.calibration --observations var/localflink/loop/observations.csv --test-steady

The sweep writes one ``PROFILING_COLUMNS`` row per (parallelism, rate) point with the throughput
and busy fraction from counter deltas and the job's p95 latency (flinktune.localflink.profiling).
Calibration is ``flinktune.calibration.mechanism.calibrate`` (what ``flinktune twin calibrate`` runs)
starting from the built-in YSB profile, with 25 % of the runs held out; the scores printed for
the held-out runs are the throughput MAPE, the recovery MAPE (runs with a failure) and the
latency-class accuracy. The calibrated profile is written beside the observations.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import pandas as pd

from flinktune.calibration.mechanism import calibrate, evaluate, read_observations
from flinktune.localflink.distribution import repo_root
from flinktune.metrics.schema import PROFILING_COLUMNS
from flinktune.twin.profile import ClusterProfile


def sweep(out: Path, rates: list[float], parallelisms: list[int], work: int) -> Path:
    from flinktune.config_space import Configuration
    from flinktune.localflink.benchjob import bench_cluster, rest_source, start_bench_job
    from flinktune.localflink.profiling import measure_point

    cluster, rate = bench_cluster(out)
    rows = []
    try:
        config = Configuration(parallelisms[0], 1, 1.0, 1024, 10)
        control, realizer = start_bench_job(cluster, rate, name="calibration", work=work, config=config, rec_s=rates[0])
        source = rest_source(control, realizer)
        for p in parallelisms:
            realizer.apply("calibration", realizer.config.with_(parallelism=p))
            for r in rates:
                row = measure_point(control, source, rate, realizer.config, r)
                rows.append(row)
                print(
                    f"p={p} rate {r:.0f}: throughput {row['throughput']:.0f}, busy {row['busy']:.2f}, p95 {row['latency_ms']:.0f} ms",
                    flush=True,
                )
        source.stop()
    finally:
        cluster.down()
    path = out / "observations.csv"
    tmp = path.with_suffix(".tmp")
    pd.DataFrame(rows)[list(PROFILING_COLUMNS)].to_csv(tmp, index=False)
    tmp.replace(path)
    return path


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--observations", type=Path, action="append", default=[])
    ap.add_argument("--sweep", action="store_true")
    ap.add_argument("--rates", default="3000,9000,15000")
    ap.add_argument("--parallelism", default="1,2")
    ap.add_argument("--work", type=int, default=10000)
    ap.add_argument("--holdout", type=float, default=0.25, help="share of runs held out at random (ignored with --test-steady)")
    ap.add_argument(
        "--test-steady",
        action="store_true",
        help="fit on every run except the decision loop's steady rows (run_id ending in -steady, written by "
        "benchmarks/localflink/loop.py) and score on those: held-out runs of another kind than the fit's",
    )
    ap.add_argument("--out", type=Path, default=repo_root() / "var" / "localflink" / "calibration")
    args = ap.parse_args(argv)
    out = args.out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    paths = list(args.observations)
    if args.sweep:
        t = time.time()
        paths.append(
            sweep(out, [float(r) for r in args.rates.split(",")], [int(p) for p in args.parallelism.split(",")], args.work)
        )
        print(f"sweep took {time.time() - t:.0f} s")
    if not paths:
        ap.error("give --observations FILE or --sweep")
    obs = pd.concat([read_observations(str(p)) for p in paths], ignore_index=True)
    base = ClusterProfile.default("ysb")
    test = None
    if args.test_steady:
        steady = obs["run_id"].astype(str).str.endswith("-steady")
        if not steady.any() or steady.all():
            ap.error(f"--test-steady needs both steady loop rows and other runs; got {int(steady.sum())} of {len(obs)} steady")
        obs, test = obs[~steady].reset_index(drop=True), obs[steady].reset_index(drop=True)
    result = calibrate(obs, base, holdout=0.0 if test is not None else args.holdout, seed=0, duration_s=60)
    held = evaluate(result.profile, test, duration_s=60) if test is not None else result.holdout
    profile_path = result.profile.to_yaml(out / "calibrated_profile.yaml")
    print(
        result.summary()
        if test is None
        else f"fitted on {len(obs)} runs; held-out steady loop rows ({len(test)}): throughput MAPE {held['throughput_mape']:.1%}, "
        f"latency-class accuracy {held['latency_class_accuracy']:.1%}"
    )
    print(
        json.dumps(
            {
                "runs": len(obs),
                "held_out_runs": len(test) if test is not None else None,
                "profile": str(profile_path),
                "params": result.params,
                "train": result.train,
                "holdout": held,
            },
            default=float,
            indent=2,
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
