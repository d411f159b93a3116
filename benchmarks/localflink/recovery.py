"""Recovery after a TaskManager failure on the local Flink cluster, measured N times.

    .venv/bin/python -m benchmarks.localflink.recovery [--parallelism 2] [--rate 20000] [--repeats 3]

Starts a local cluster and the benchmark job at ``--parallelism`` (one slot per TaskManager),
offers ``--rate`` rec/s, and ``--repeats`` times: waits ``--gap`` s, SIGKILLs one TaskManager by
PID, starts a replacement and times detection, running again and recovery
(flinktune.localflink.failures: the source's windowed output back within 20 % of the pre-failure
rate). Prints one line per failure and the medians, and writes ``recovery.csv`` (PROFILING_COLUMNS
rows with ``recovery_s``: calibration input for ``benchmarks/localflink/calibration.py``) and
``recovery.json`` under ``--out``. Stops every process by PID at the end, also on errors.
Caveat (see the failures module): the paced source does not replay the outage's backlog, so this
is the restart-and-resume part of a recovery, a lower bound for a queue-fed job.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import uuid
from pathlib import Path

import numpy as np
import pandas as pd

from flinktune.config_space import Configuration
from flinktune.localflink import inject_taskmanager_failure
from flinktune.localflink.benchjob import BENCH_JAR, bench_cluster, start_bench_job
from flinktune.localflink.distribution import repo_root
from flinktune.metrics.schema import PROFILING_COLUMNS


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--parallelism", type=int, default=2)
    ap.add_argument("--rate", type=float, default=20000.0, help="offered rec/s (keep it well under the capacity)")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--gap", type=float, default=20.0, help="seconds of normal running before each failure")
    ap.add_argument("--work", type=int, default=10000)
    ap.add_argument("--out", type=Path, default=repo_root() / "var" / "localflink" / "recovery")
    args = ap.parse_args(argv)
    if args.parallelism < 1 or args.repeats < 1 or not args.rate > 0:
        ap.error("--parallelism and --repeats must be >= 1 and --rate > 0")
    out = args.out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    if not BENCH_JAR.exists():
        ap.error(f"{BENCH_JAR} is missing: run `bash scripts/setup_local_flink.sh` first")
    cluster, rate = bench_cluster(out)
    config = Configuration(args.parallelism, 1, 1.0, 1024, 10)
    rows, results = [], []
    try:
        control, _ = start_bench_job(cluster, rate, name="recovery-bench", work=args.work, config=config, rec_s=args.rate)
        for i in range(args.repeats):
            time.sleep(args.gap)
            rec = inject_taskmanager_failure(cluster, control, timeout_s=150)
            results.append(rec)
            print(
                f"failure {i + 1}/{args.repeats} at p={args.parallelism}, {args.rate:,.0f} rec/s: detected +{rec.detected_s:.1f} s, "
                f"running again +{rec.running_again_s:.1f} s, "
                + (f"recovered +{rec.recovery_s:.1f} s" if rec.recovered else f"NOT recovered within {rec.recovery_s:.0f} s"),
                flush=True,
            )
            rows.append(
                {
                    "job": "recovery-bench",
                    "run_id": f"failure-{uuid.uuid4().hex[:8]}",
                    "ts_ms": int(time.time() * 1000),
                    **config.to_dict(),
                    "input_rate": args.rate,
                    "throughput": rec.pre_failure_rate,
                    "latency_ms": np.nan,
                    "recovery_s": rec.recovery_s if rec.recovered else np.nan,
                    "cpu_used": np.nan,
                    "memory_used_mb": np.nan,
                }
            )
    finally:
        cluster.down()
    pd.DataFrame(rows, columns=list(PROFILING_COLUMNS)).to_csv(out / "recovery.csv", index=False)
    ok = [r for r in results if r.recovered]
    summary = {
        "parallelism": args.parallelism,
        "rate": args.rate,
        "failures": len(results),
        "recovered": len(ok),
        "median_detected_s": float(np.median([r.detected_s for r in ok])) if ok else None,
        "median_running_again_s": float(np.median([r.running_again_s for r in ok])) if ok else None,
        "median_recovery_s": float(np.median([r.recovery_s for r in ok])) if ok else None,
        "runs": [r.__dict__ for r in results],
    }
    (out / "recovery.json").write_text(json.dumps(summary, indent=2, default=float))
    print(json.dumps({k: v for k, v in summary.items() if k != "runs"}))
    return 0 if len(ok) == len(results) else 1


if __name__ == "__main__":
    sys.exit(main())
