"""Long form of issue 9: the decision loop with the flinktune policy against a real local Flink.

    .venv/bin/python benchmarks/local_flink_loop.py [--minutes 17] [--out var/localflink/loop]

1. starts a local cluster (1 TaskManager, 1 slot, 1024 MB) and the benchmark job at p=1;
2. profiles it: p=1 and p=2 at a low rate (capacity = throughput / busy fraction from counter
   deltas), and one TaskManager kill at p=2 (recovery time); rows go to observations.csv;
3. runs the loop every ``--interval`` s for ``--minutes`` on a rising-then-falling rate from
   0.35x to 1.4x the measured p=1 capacity (capped at 0.75x the p=2 capacity), with the
   flinktune policy, a measured capacity model as its surrogate (flinktune.localflink.capacity)
   and a linear-trend forecaster of the last 3 minutes; the guard's windows are shortened to fit
   a 17-minute run (stabilization 60 s, one scale-down per 240 s);
4. prints the timeline (rate, throughput, p95, lag, parallelism, action, reason, downtime) and
   writes timeline.csv, observations.csv (profiling + one row per loop step) and summary.json.
Stops every process by PID at the end, also on errors.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

from flinktune.clock import SystemClock
from flinktune.config_space import ConfigSpace, Configuration
from flinktune.guard import GuardRules, SafetyGuard
from flinktune.localflink import (
    ClusterSpec, JobControl, JobSpec, LocalFlinkCluster, LocalFlinkRealizer, RateFile, RestMetricsSource, free_port,
    inject_taskmanager_failure, rise_and_fall,
)
from flinktune.localflink.capacity import CapacitySurrogate
from flinktune.localflink.distribution import repo_root
from flinktune.localflink.profiling import measure_point
from flinktune.loop import DecisionLoop
from flinktune.metric_schema import PROFILING_COLUMNS
from flinktune.policies.flinktune_policy import FlinktunePolicy
from flinktune.stages import PolicyContext
from flinktune.store import MemoryStateStore
from models.forecasting.types import QuantileForecast

SPACE = ConfigSpace(parallelism=(1, 2), task_slots=(1,), cpu=(1.0,), memory_mb=(1024,), checkpoint_interval_s=(10,))


def trend_forecast(source: RestMetricsSource, job: str, now: float, horizon_s: int = 300, bin_s: int = 30) -> QuantileForecast:
    """Linear trend of the offered rate over the last 3 minutes, extrapolated; q90 = q50 x 1.1."""
    df = source.fetch(job, int((now - 180) * 1000), int(now * 1000) + 1)
    s = df[df["metric"] == "workloadRate"].groupby("ts_ms")["value"].sum()
    last = float(s.iloc[-1]) if len(s) else 0.0
    slope = float(np.polyfit((s.index.to_numpy() - s.index[0]) / 1000.0, s.to_numpy(), 1)[0]) if len(s) > 5 else 0.0
    t = np.arange(1, horizon_s // bin_s + 1) * bin_s
    q50 = np.maximum(last + slope * t, 0.0)
    return QuantileForecast(start=pd.Timestamp(now, unit="s", tz="UTC"), bin_s=bin_s, mean=q50,
                            quantiles={0.5: q50, 0.9: q50 * 1.1}, model="linear-trend-3min")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--minutes", type=float, default=17.0)
    ap.add_argument("--interval", type=float, default=30.0)
    ap.add_argument("--work", type=int, default=10000)
    ap.add_argument("--latency-target-ms", type=float, default=3000.0)
    ap.add_argument("--out", type=Path, default=repo_root() / "var" / "localflink" / "loop")
    args = ap.parse_args(argv)
    out = args.out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    jar = repo_root() / "var" / "localflink" / "flinkjob.jar"
    cluster = LocalFlinkCluster(out / "cluster", ClusterSpec(rest_port=free_port(), rpc_port=free_port(), tm_slots=1, tm_memory_mb=1024))
    rate = RateFile(out / "rate.txt")
    obs: list[dict] = []
    timeline: list[dict] = []
    t_start = time.time()

    def log(msg: str) -> None:
        print(f"[{time.time() - t_start:7.1f}s] {msg}", flush=True)

    try:
        log("starting the cluster")
        cluster.up(timeout_s=180)
        rate.set(3000)
        control = JobControl(cluster.rest, JobSpec(jar=jar, name="loop-bench", rate_file=rate.path, work=args.work, keys=500))
        p1 = Configuration(1, 1, 1.0, 1024, 10)
        realizer = LocalFlinkRealizer(cluster, control, p1)
        realizer.deploy()
        source = RestMetricsSource(control, config_provider=lambda: realizer.config)
        source.start(interval_s=2.0)

        log("profiling p=1 and p=2")
        prof = {}
        for cfg in (p1, p1.with_(parallelism=2)):
            if cfg != realizer.config:
                res = realizer.apply("loop-bench", cfg)
                log(f"profiling rescale to p={cfg.parallelism}: {res.mode}, {res.downtime_s:.2f} s down")
            row = measure_point(control, source, rate, cfg, 3000)
            prof[cfg.parallelism] = row
            obs.append(row)
            log(f"p={cfg.parallelism} at 3000/s: throughput {row['throughput']:.0f}/s, busy {row['busy']:.2f}, "
                f"capacity {row['capacity']:.0f}/s, p95 {row['latency_ms']:.0f} ms")
        rec = inject_taskmanager_failure(cluster, control, timeout_s=150)
        log(f"failure at p=2: detected +{rec.detected_s}s, running again +{rec.running_again_s:.1f}s, recovered +{rec.recovery_s:.1f}s")
        obs.append(dict(obs[-1], run_id="failure-p2", recovery_s=rec.recovery_s))
        cap = {p: prof[p]["capacity"] for p in prof}
        cap[2] = max(cap[2], cap[1])  # on a loaded 2-core box a second subtask never lowers capacity
        sur = CapacitySurrogate(SPACE, cap, {p: prof[p]["latency_ms"] for p in prof}, rec.recovery_s,
                                cpu_core_s_per_record=float(np.nanmean([prof[p]["cpu_used"] / 3000 for p in prof])),
                                memory_used_mb=float(np.nanmean([prof[p]["memory_used_mb"] for p in prof])))
        low, high = 0.35 * cap[1], min(1.4 * cap[1], 0.75 * cap[2])
        log(f"capacity model: p1 {cap[1]:.0f}/s, p2 {cap[2]:.0f}/s; trace {low:.0f} -> {high:.0f} -> {low:.0f} rec/s")
        res = realizer.apply("loop-bench", p1)
        rate.set(low)
        log(f"back to p=1 for the loop: {res.mode}, {res.downtime_s:.2f} s down; settling 60 s")
        time.sleep(60)

        guard = SafetyGuard(SPACE, args.latency_target_ms, GuardRules(stabilization_s=60, scale_down_window_s=240, rollback_window_s=180))
        policy = FlinktunePolicy(SPACE)
        loop = DecisionLoop(
            job="loop-bench", source=source, realizer=realizer, policy=policy, guard=guard, store=MemoryStateStore(),
            clock=SystemClock(),
            context=lambda st: PolicyContext(args.latency_target_ms, 180.0, forecast=trend_forecast(source, "loop-bench", time.time()),
                                             surrogate=sur, extras={"profiled_max_rate": cap[2]}),
            window_s=90, max_staleness_s=30,
        )
        duration = args.minutes * 60
        trapezoid = duration - 180  # the last 3 minutes stay low, so the scale-down can happen
        loop_t0 = time.time()
        next_step = loop_t0 + args.interval
        while time.time() - loop_t0 < duration:
            t = time.time() - loop_t0
            rate.set(rise_and_fall(t, low=low, high=high, duration_s=trapezoid, hold_frac=0.25))
            if time.time() >= next_step:
                o = loop.step()
                s = o.state
                row = {"t_s": round(t), "rate": s.input_rate, "throughput": s.throughput, "p95_ms": s.latency_p95_ms,
                       "lag": s.lag, "busy": s.busy_ratio, "parallelism": s.config.parallelism, "action": o.decision.action.value,
                       "target_p": o.decision.target.parallelism if o.decision.target else None,
                       "mode": o.result.mode if o.result and o.result.changed else "", "downtime_s": o.result.downtime_s if o.result and o.result.changed else 0.0,
                       "reason": o.decision.reason}
                timeline.append(row)
                log(f"t={t:5.0f}s rate {s.input_rate:7.0f} thr {s.throughput:7.0f} p95 {s.latency_p95_ms:7.0f} ms lag {s.lag:8.0f} "
                    f"p={s.config.parallelism} -> {o.line()}")
                if s.problems == () and np.isfinite(s.latency_p95_ms):
                    obs.append({"job": "loop-bench", "run_id": f"loop-{len(timeline)}", "ts_ms": int(s.ts * 1000), **s.config.to_dict(),
                                "input_rate": s.input_rate, "throughput": s.throughput, "latency_ms": s.latency_p95_ms,
                                "recovery_s": np.nan, "cpu_used": s.cpu_used, "memory_used_mb": s.memory_used_mb})
                next_step += args.interval
            time.sleep(2.0)
        source.stop()
    finally:
        stopped = cluster.down()
        log(f"stopped PIDs {stopped}")
        pd.DataFrame(timeline).to_csv(out / "timeline.csv", index=False)
        frame = pd.DataFrame(obs)
        if not frame.empty:
            frame[list(PROFILING_COLUMNS)].to_csv(out / "observations.csv", index=False)
        changes = [r for r in timeline if r["mode"]]
        summary = {"minutes": (time.time() - t_start) / 60, "changes": changes,
                   "scale_ups": sum(1 for r in changes if r["target_p"] > r["parallelism"]),
                   "scale_downs": sum(1 for r in changes if r["target_p"] < r["parallelism"])}
        (out / "summary.json").write_text(json.dumps(summary, indent=2, default=float))
        log(json.dumps(summary, default=float))
    return 0


if __name__ == "__main__":
    sys.exit(main())
