"""Long form of the local Flink check: the decision loop with the flinktune policy against a real local Flink.

    .venv/bin/python -m benchmarks.localflink.loop [--minutes 15] [--out var/localflink/loop]

1. starts a local cluster (1 TaskManager, 1 slot, 1024 MB) and the benchmark job at p=1;
2. runs the loop every ``--interval`` s. Its policy is the flinktune policy behind a profiling
   gate (flinktune.localflink.profiler): with no trustworthy capacity for p=1 and p=2 the first
   step asks to profile them, and the loop's profiler ramps each to saturation (about 20 s a
   step; the capacity is the rate the job sustains once it falls behind), times one
   TaskManager failure, and goes back to p=1. Capacities cap the policy's own busy-time
   measurements (ProfiledCapacity) and make its surrogate;
3. then offers a rate plan built from the measured capacities (flinktune.localflink.workload.
   RatePlan): 0.4x p=1's capacity, rising to min(1.3x p=1's, 0.8x p=2's) so that a scale-up is
   required, and back down so that a scale-down is correct, for ``--minutes`` (profiling time
   not counted); the guard's windows and the policy's dwell are shortened to fit;
4. judges every reconfiguration (flinktune.localflink.audit: latency under target after it and
   no needless capacity), and writes timeline.csv, metrics.csv (raw samples), observations.csv
   (profiling steps, the failure and one row per loop step, PROFILING_COLUMNS; a loop row's run_id
   ends in ``-steady`` when the offered rate and the configuration were constant for the 150 s before it: the held-out set of
   ``benchmarks/localflink/calibration.py --test-steady``),
   profiling_steps.csv, profiling_snapshots.csv and summary.json (capacities, plan, every
   change with its verdict and the realizer's measured downtime, ``done``).
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

from flinktune.backends.local_flink import local_flink_backend
from flinktune.config_space import ConfigSpace, Configuration
from flinktune.decision.guard import GuardRules
from flinktune.decision.loop import LoopSettings, build_decision_loop
from flinktune.decision.store import MemoryStateStore
from flinktune.localflink.audit import Change, judge_changes
from flinktune.localflink.benchjob import bench_cluster, rest_source, start_bench_job
from flinktune.localflink.capacity import CapacitySurrogate, ProfiledCapacity
from flinktune.localflink.cpu import CpuMeter
from flinktune.localflink.distribution import repo_root
from flinktune.localflink.profiler import ProfileWhenUntrusted, SaturationProfiler, WithoutProfiling
from flinktune.localflink.workload import RatePlan
from flinktune.metrics.schema import PROFILING_COLUMNS
from flinktune.tuner.capacity import ShapeCapacities, shape_of
from flinktune.tuner.flinktune_policy import FlinktunePolicy
from models.forecasting.types import QuantileForecast

SPACE = ConfigSpace(parallelism=(1, 2), task_slots=(1,), cpu=(1.0,), memory_mb=(1024,), checkpoint_interval_s=(10,))
JOB = "loop-bench"


def trend_forecast(source, job: str, now: float, horizon_s: int = 300, bin_s: int = 30) -> QuantileForecast:
    """Linear trend of the offered rate over the last 3 minutes, extrapolated; q90 = q50 x 1.1."""
    df = source.fetch(job, int((now - 180) * 1000), int(now * 1000) + 1)
    s = df[df["metric"] == "workloadRate"].groupby("ts_ms")["value"].sum()
    last = float(s.iloc[-1]) if len(s) else 0.0
    slope = float(np.polyfit((s.index.to_numpy() - s.index[0]) / 1000.0, s.to_numpy(), 1)[0]) if len(s) > 5 else 0.0
    t = np.arange(1, horizon_s // bin_s + 1) * bin_s
    q50 = np.maximum(last + slope * t, 0.0)
    return QuantileForecast(
        start=pd.Timestamp(now, unit="s", tz="UTC"),
        bin_s=bin_s,
        mean=q50,
        quantiles={0.5: q50, 0.9: q50 * 1.1},
        model="linear-trend-3min",
    )


class TrendForecast:
    """The benchmark's ``ForecastProvider``: :func:`trend_forecast` of the offered rate (wall clock)."""

    def __init__(self, source) -> None:
        self.source = source

    def forecast(self, job: str, now: float) -> QuantileForecast:
        return trend_forecast(self.source, job, time.time())


class ProfiledModels:
    """The benchmark's ``ModelProvider``: a surrogate from the profiled capacities once every
    parallelism has a trusted one (None before), and the highest capacity profiled."""

    def __init__(self, capacity: ProfiledCapacity, profiler: SaturationProfiler) -> None:
        self.capacity, self.profiler = capacity, profiler

    @property
    def surrogate(self) -> CapacitySurrogate | None:
        capacity, profiler = self.capacity, self.profiler
        if not all(capacity.trusted(p) for p in SPACE.parallelism):
            return None
        unsat = [s for s in profiler.steps if not s["saturated"] and s["throughput"] > 0 and np.isfinite(s["flink_cores"])]
        per_record = float(np.mean([s["flink_cores"] / s["throughput"] for s in unsat])) if unsat else 3e-5
        heap = [o["memory_used_mb"] for o in profiler.observations if np.isfinite(o["memory_used_mb"])]
        return CapacitySurrogate.from_estimates(
            SPACE,
            capacity.profiled.values(),
            recovery_s=profiler.recovery_s or 30.0,
            cpu_core_s_per_record=per_record,
            memory_used_mb=float(np.mean(heap)) if heap else 200.0,
        )

    @property
    def profiled_max_rate(self) -> float:
        return max((e.capacity for e in self.capacity.profiled.values()), default=0.0)

    def refresh(self) -> None:
        """Nothing to reload: both are read from the profiler's results when asked."""


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--minutes", type=float, default=15.0, help="length of the rate plan (profiling not counted)")
    ap.add_argument("--interval", type=float, default=30.0)
    ap.add_argument("--work", type=int, default=10000)
    ap.add_argument("--latency-target-ms", type=float, default=3000.0)
    ap.add_argument("--max-steps", type=int, default=6, help="profiling steps per parallelism at most")
    ap.add_argument("--settle-s", type=float, default=5.0, help="seconds each profiling step settles before measuring")
    ap.add_argument("--measure-s", type=float, default=15.0, help="seconds each profiling step measures")
    ap.add_argument("--no-failure", action="store_true", help="skip the TaskManager kill (recovery time then assumed 30 s)")
    ap.add_argument("--out", type=Path, default=repo_root() / "var" / "localflink" / "loop")
    args = ap.parse_args(argv)
    out = args.out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    cluster, rate = bench_cluster(out)
    timeline: list[dict] = []
    loop_obs: list[dict] = []
    t_start = time.time()
    source = profiler = plan = None
    plan_t0 = end_ts = None
    plan_profiling_s = 0.0  # profiling time already spent when the plan started (the plan's clock skips profiling)

    def plan_time(now: float) -> float:
        return now - plan_t0 - (profiler.seconds - plan_profiling_s) if plan is not None else -1.0

    def log(msg: str) -> None:
        print(f"[{time.time() - t_start:7.1f}s] {msg}", flush=True)

    try:
        log("starting the cluster")
        p1 = Configuration(1, 1, 1.0, 1024, 10)
        control, realizer = start_bench_job(cluster, rate, name=JOB, work=args.work, config=p1, rec_s=3000)
        source = rest_source(control, realizer)
        cpu = CpuMeter(lambda: [t.pid for t in cluster.taskmanagers()] + [cluster.status()["jobmanager_pid"] or 0])
        capacity = ProfiledCapacity()
        profiler = SaturationProfiler(
            JOB,
            realizer,
            rate,
            capacity,
            out,
            source=source,
            cpu=cpu,
            max_steps=args.max_steps,
            settle_s=args.settle_s,
            measure_s=args.measure_s,
            measure_recovery=not args.no_failure,
            log=log,
        )
        view = WithoutProfiling(source, profiler.periods)
        # The one shape's capacity model is the profiled one: it caps the policy's busy-time measurements.
        inner = FlinktunePolicy(
            SPACE,
            capacities=ShapeCapacities(models={shape_of(p1): capacity}),
            min_down_step=1,
            min_dwell_s=180,
            down_horizon_s=120,
        )
        policy = ProfileWhenUntrusted(inner, capacity, SPACE)
        guard_rules = GuardRules(stabilization_s=60, scale_down_window_s=240, rollback_window_s=180)

        backend = local_flink_backend(realizer, view, profiler)
        loop = build_decision_loop(
            backend,
            LoopSettings(JOB, args.latency_target_ms, 180.0, window_s=90, max_staleness_s=30, frozen_after_s=60),
            policy=policy,
            space=SPACE,
            store=MemoryStateStore(),
            guard_rules=guard_rules,
            forecaster=TrendForecast(view),
            models=ProfiledModels(capacity, profiler),
        )
        duration = args.minutes * 60
        next_step = time.time() + args.interval
        cpu.mark()
        while plan is None or plan_time(time.time()) < duration:
            now = time.time()
            if plan is None and all(capacity.trusted(p) for p in SPACE.parallelism):
                cap = {p: capacity.profiled[p].capacity for p in SPACE.parallelism}
                plan = RatePlan.from_capacities(cap, duration)
                # The plan starts once the view shows samples again (profiling is hidden for margin_s).
                plan_t0, plan_profiling_s = now + view.margin_s, profiler.seconds
                log(
                    f"capacities {cap}; rate plan {plan.low:,.0f} -> {plan.high:,.0f} -> {plan.low:,.0f} rec/s over {args.minutes:g} min"
                )
            if plan is None and now - t_start > 900:
                raise RuntimeError("no trusted capacity for every parallelism after 15 minutes: profiling never completed")
            t = plan_time(now)
            rate.set(plan.rate_at(t) if plan is not None else 3000)
            if now >= next_step:
                o = loop.step()
                s = o.state
                machine, flink = cpu.read()
                cpu.mark()
                change = o.result if o.result is not None and o.result.changed else None
                row = {
                    "t_s": round(t),
                    "ts": s.ts,
                    "rate": s.input_rate,
                    "throughput": s.throughput,
                    "p95_ms": s.latency_p95_ms,
                    "lag": s.lag,
                    "busy": s.busy_ratio,
                    "parallelism": s.config.parallelism,
                    "action": o.decision.action.value,
                    "target_p": o.decision.target.parallelism if o.decision.target else None,
                    "mode": change.mode if change is not None else "",
                    "downtime_s": change.downtime_s if change is not None else 0.0,
                    "machine_cores": machine,
                    "flink_cores": flink,
                    "reason": o.decision.reason,
                }
                timeline.append(row)
                log(
                    f"t={t:5.0f}s rate {s.input_rate:7.0f} thr {s.throughput:7.0f} p95 {s.latency_p95_ms:7.0f} ms lag {s.lag:8.0f} "
                    f"p={s.config.parallelism} cpu {machine:.2f}/{flink:.2f} -> {o.line()}"
                )
                if plan is not None and not s.problems and np.isfinite(s.latency_p95_ms):
                    # "steady": the offered rate and the configuration were constant over the evaluation window
                    # and the 60 s meters before it (a restarted task's meter reads low for a minute), so the row
                    # is a clean held-out point for calibration (chosen by input, not outcome).
                    recent_change = any(r["mode"] and r["t_s"] > t - 150 for r in timeline)
                    steady = t >= 150 and not recent_change and np.ptp([plan.rate_at(t - d) for d in range(0, 151, 5)]) < 1.0
                    loop_obs.append(
                        {
                            "job": JOB,
                            "run_id": f"loop-{len(timeline)}" + ("-steady" if steady else ""),
                            "ts_ms": int(s.ts * 1000),
                            **s.config.to_dict(),
                            "input_rate": s.input_rate,
                            "throughput": s.throughput,
                            "latency_ms": s.latency_p95_ms,
                            "recovery_s": np.nan,
                            "cpu_used": s.cpu_used,
                            "memory_used_mb": s.memory_used_mb,
                        }
                    )
                next_step = max(next_step + args.interval, time.time() + 1)
            time.sleep(2.0)
        end_ts = time.time()
        source.stop()
    finally:
        stopped = cluster.down()
        log(f"stopped PIDs {stopped}")
        end_ts = end_ts or time.time()
        summary = write_results(
            out,
            args,
            timeline,
            loop_obs,
            source,
            profiler,
            plan,
            plan_t0,
            plan_time(end_ts) if plan is not None else 0.0,
            end_ts,
            t_start,
        )
        log(json.dumps({k: summary[k] for k in ("scale_ups", "correct_scale_ups", "scale_downs", "correct_scale_downs", "done")}))
    return 0


def write_results(out: Path, args, timeline, loop_obs, source, profiler, plan, plan_t0, plan_s, end_ts, t_start) -> dict:
    """timeline.csv, metrics.csv, observations.csv and summary.json (with a verdict per change)."""
    pd.DataFrame(timeline).to_csv(out / "timeline.csv", index=False)
    samples = source.fetch(JOB, 0, 2**62) if source is not None else pd.DataFrame()
    if len(samples):
        samples.to_csv(out / "metrics.csv", index=False)
    summary: dict = {"minutes_total": (time.time() - t_start) / 60, "latency_target_ms": args.latency_target_ms}
    verdicts = []
    if profiler is not None:
        profiler.write()
        obs = pd.DataFrame(profiler.observations + loop_obs, columns=list(PROFILING_COLUMNS))
        obs.to_csv(out / "observations.csv", index=False)
        cap = {p: e.capacity for p, e in profiler.capacity.profiled.items()}
        summary["profiling"] = {
            "seconds": profiler.seconds,
            "recovery_s": profiler.recovery_s,
            "rescales": profiler.rescales,
            "estimates": [e.to_dict() for e in profiler.estimates],
        }
        summary["capacity"] = cap
        if plan is not None:
            summary["rate_plan"] = {
                "low": plan.low,
                "high": plan.high,
                "knots": plan.knots,
                "started": plan_t0,
                "loop_minutes": plan_s / 60,
                "scale_up_required": plan.high > cap[min(cap)],
                "scale_down_correct_at_low": plan.low <= 0.85 * cap[min(cap)],
            }
        changes = [
            Change(r["ts"], int(r["parallelism"]), int(r["target_p"]), r["mode"], float(r["downtime_s"]), r["reason"])
            for r in timeline
            if r["mode"] and r["target_p"] is not None
        ]
        if changes and len(samples):
            hidden = WithoutProfiling(source, profiler.periods).fetch(JOB, 0, 2**62)
            verdicts = judge_changes(hidden, changes, cap, args.latency_target_ms, end_ts)
        if len(samples) and plan_t0 is not None:
            lat = WithoutProfiling(source, profiler.periods, margin_s=0).fetch(JOB, int(plan_t0 * 1000), 2**62)
            lat = lat.loc[lat["metric"] == "latencyP95Ms", "value"]
            summary["latency_over_target_fraction"] = float((lat > args.latency_target_ms).mean()) if len(lat) else None
    summary["changes"] = [v.to_dict() for v in verdicts]
    ups = [v for v in verdicts if v.change.kind == "scale-up"]
    downs = [v for v in verdicts if v.change.kind == "scale-down"]
    summary.update(
        scale_ups=len(ups),
        correct_scale_ups=sum(v.correct is True for v in ups),
        scale_downs=len(downs),
        correct_scale_downs=sum(v.correct is True for v in downs),
    )
    summary["done"] = bool(
        summary["correct_scale_ups"] >= 1 and summary["correct_scale_downs"] >= 1 and plan_s / 60 >= min(15.0, args.minutes) - 0.5
    )
    (out / "summary.json").write_text(json.dumps(summary, indent=2, default=float))
    return summary


if __name__ == "__main__":
    sys.exit(main())
