"""Replay flinktune over a finished demo's tuned period, from the state the job was in when tuning started.

``python -m benchmarks.policy.demo_replay --var-dir /tmp/demo [--job demo] [--interval-s 600] [--watch-every-s 60]
[--utilization 0.75]`` rebuilds the tuned period of the demo in ``--var-dir`` as its report does
(:func:`flinktune.report.counterfactual.same_load_from_twin`: same load, seed, noise and failures) and
replays the flinktune policy over it with the replay's own models, printing one JSON line per run
with its cost and latency and one line per change. It isolates the policy from the demo's trained
models: a setting that helps here and not in the demo points at the models, not at the policy.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import pandas as pd

from flinktune.config_space import default_space
from flinktune.replay.harness import ReplaySettings, replay_policy
from flinktune.report.counterfactual import same_load_from_twin
from flinktune.twin.simulator import TwinJob


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--var-dir", type=Path, required=True, help="a finished demo's state folder")
    p.add_argument("--job", default="demo")
    p.add_argument(
        "--tuned-hours", type=float, default=4.0, help="the demo's --tuned-hours (the period replayed ends at the twin's clock)"
    )
    p.add_argument("--interval-s", type=int, default=600, help="seconds between scheduled decisions (the demo's default)")
    p.add_argument("--watch-every-s", type=int, default=60, help="the watch between decisions (0: off)")
    p.add_argument("--utilization", type=float, default=None, help="the policy's utilization targets (default: the policy's)")
    p.add_argument("--latency-target-ms", type=float, default=1000.0, help="the job's p95 latency target")
    a = p.parse_args(argv)
    folder = a.var_dir / "twin" / a.job
    if not (folder / "twin.json").exists():
        raise SystemExit(f"no twin for job {a.job!r} under {folder}: run the demo into --var-dir first")
    twin = TwinJob.load(folder / "twin.json")
    trace = pd.read_parquet(folder / "trace.parquet")["rate"]
    end = int(twin.now)
    same = same_load_from_twin(twin, trace, end - int(a.tuned_hours * 3600), end)
    util = a.utilization
    options = {"utilization": util, "down_utilization": util, "reshape_utilization": util} if util is not None else None
    settings = ReplaySettings(
        failures=str(same.start_state["failures"]),
        seed=int(same.start_state["seed"]),
        watch_every_s=a.watch_every_s,
        latency_target_ms=a.latency_target_ms,
    )
    started = time.perf_counter()
    run = replay_policy(
        "flinktune",
        same.trace,
        same.profile,
        default_space(),
        settings,
        start_state=same.start_state,
        policy_options=options,
        interval_s=a.interval_s,
    )
    for d in run.decisions:
        cap = d["reason"].find("[utilization capped")  # the latency cap's note, at the end
        print(
            f"{pd.Timestamp(d['ts'], unit='s'):%H:%M:%S} {d['action']}: {d['reason'][:160]}"
            + (f" ... {d['reason'][cap:]}" if cap >= 0 else "")
        )
    s, minutes = run.summary, run.minutes
    print(
        json.dumps(
            {
                "interval_s": a.interval_s,
                "watch_every_s": a.watch_every_s,
                "utilization": util,
                "cpu_core_hours": round(s["cpu_core_hours"], 1),
                "latency_p95_ms": round(s["latency_p95_ms"]),
                "target_ms": a.latency_target_ms,
                "minutes_over_target": int((minutes["latency_p95_ms"] > a.latency_target_ms).sum()),
                "reconfigurations": int(s["reconfigurations"]),
                "wall_s": round(time.perf_counter() - started, 1),
            }
        )
    )


if __name__ == "__main__":
    main()
