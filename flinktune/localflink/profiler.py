"""Profiling inside the decision loop on the local cluster: when to profile, how, and what to hide.

- :class:`ProfileWhenUntrusted` wraps a policy: while the current parallelism or a neighbour it
  may move to has no trustworthy (saturation-profiled) capacity, it asks to profile them; a
  reconfiguration to an unprofiled parallelism becomes a request to profile it first; a policy's
  own profiling requests pass through.
- :class:`SaturationProfiler` is the loop's ``profiler`` callable ``(configs, rate)``: it takes
  the benchmark job over, moves it to each configuration (through the realizer, so every rescale
  has a measured downtime), ramps the offered rate to saturation
  (:func:`~flinktune.localflink.profiling.ramp_to_saturation`), records the estimates in a
  :class:`~flinktune.localflink.capacity.ProfiledCapacity`, optionally times one TaskManager
  failure, restores the configuration and the rate, and rewrites ``observations.csv`` (the
  calibration table, ``PROFILING_COLUMNS``) and ``profiling_steps.csv`` (every step's summary).
- :class:`WithoutProfiling` is a ``MetricsSource`` view that leaves out the samples taken while
  profiling (plus ``margin_s`` for Flink's 60 s meters): profiling rates are not the workload,
  and the forecast, the evaluation and the policy must not read them as such.

This takes over the live job's input, which only a benchmark can do (it owns the rate file); on
Kubernetes profiling runs as separate short jobs.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from flinktune.config_space import ConfigSpace, Configuration
from flinktune.decision import Action, Decision, JobState
from flinktune.decision.stages import Policy, PolicyContext
from flinktune.lake.atomic import atomic_write_with
from flinktune.localflink.capacity import ProfiledCapacity
from flinktune.localflink.cpu import CpuMeter
from flinktune.localflink.failures import inject_taskmanager_failure
from flinktune.localflink.metrics import RestMetricsSource
from flinktune.localflink.profiling import observation_row, ramp_to_saturation
from flinktune.localflink.realizer import LocalFlinkRealizer
from flinktune.localflink.saturation import CapacityEstimate
from flinktune.localflink.workload import RateFile
from flinktune.metrics.schema import PROFILING_COLUMNS

__all__ = ["ProfileWhenUntrusted", "SaturationProfiler", "WithoutProfiling"]


@dataclass
class ProfileWhenUntrusted:
    """A policy wrapper: profile before deciding on a parallelism without a trusted capacity."""

    inner: Policy
    capacity: ProfiledCapacity
    space: ConfigSpace
    name: str = ""

    def __post_init__(self) -> None:
        self.name = self.name or self.inner.name

    def wanted(self, current: Configuration) -> list[int]:
        """The current parallelism and its neighbours in the space (where the next change can go)."""
        ps = sorted(self.space.parallelism)
        if current.parallelism not in ps:
            return [current.parallelism]
        i = ps.index(current.parallelism)
        return ps[max(i - 1, 0) : i + 2]

    def decide(self, state: JobState, context: PolicyContext) -> Decision:
        cur = state.config
        missing = [p for p in self.wanted(cur) if not self.capacity.trusted(p)]
        inputs = {"planned_rate": float(state.input_rate) if np.isfinite(state.input_rate) else 0.0}
        if missing:
            return Decision(
                Action.PROFILE,
                f"no trustworthy capacity for p={missing} (the current size and where it can move): profile them "
                "near saturation before deciding",
                self.name,
                profile_configs=tuple(cur.with_(parallelism=p) for p in missing),
                inputs=inputs,
            )
        decision = self.inner.decide(state, context)
        target = decision.target
        if decision.action is Action.RECONFIGURE and target is not None and not self.capacity.trusted(target.parallelism):
            return Decision(
                Action.PROFILE,
                f"{decision.reason}; but p={target.parallelism} has no trustworthy capacity: profile it first",
                self.name,
                profile_configs=(target,),
                inputs=dict(decision.inputs, **inputs),
            )
        return decision


@dataclass
class SaturationProfiler:
    """Runs ramps to saturation for the configurations a decision asks for (see the module doc).

    ``first_rate`` starts the ramp of a parallelism with no smaller profiled one; otherwise the
    ramp starts at ``reuse`` x the largest smaller parallelism's capacity (known to be carried).
    The ``rate`` a decision passes is not used: the ramp finds its own range, which is the point.
    An untrusted result (the ramp hit ``max_steps`` before the job fell behind) is not recorded,
    so the gate asks again at the next decision.
    After a profiling rescale the job runs ``warmup_s`` at that rate first: a scale-up starts
    TaskManagers whose JVMs are cold (the first step after one measured 82 % busy at a rate the
    next step showed 50 % busy at).
    """

    job: str
    realizer: LocalFlinkRealizer
    rate_file: RateFile
    capacity: ProfiledCapacity
    out_dir: Path
    source: RestMetricsSource | None = None
    cpu: CpuMeter | None = None
    first_rate: float = 3000.0
    reuse: float = 0.8
    settle_s: float = 5.0
    measure_s: float = 15.0
    max_steps: int = 6
    warmup_s: float = 10.0
    measure_recovery: bool = True
    log: Callable[[str], None] = print
    observations: list[dict[str, Any]] = field(default_factory=list)
    steps: list[dict[str, Any]] = field(default_factory=list)
    frames: list[pd.DataFrame] = field(default_factory=list)
    estimates: list[CapacityEstimate] = field(default_factory=list)
    rescales: list[dict[str, Any]] = field(default_factory=list)
    periods: list[tuple[float, float]] = field(default_factory=list)
    recovery_s: float | None = None

    @property
    def seconds(self) -> float:
        """Wall time spent profiling so far."""
        return float(sum(b - a for a, b in self.periods))

    def start_rate(self, parallelism: int) -> float:
        smaller = [e.capacity for p, e in self.capacity.profiled.items() if p < parallelism]
        return self.reuse * max(smaller) if smaller else self.first_rate

    def _apply(self, config: Configuration, why: str) -> bool:
        if config == self.realizer.config:
            return False
        before = self.realizer.config
        res = self.realizer.apply(self.job, config)
        self.rescales.append(
            {
                "ts": time.time(),
                "from_p": before.parallelism,
                "to_p": config.parallelism,
                "mode": res.mode,
                "downtime_s": res.downtime_s,
                "why": why,
            }
        )
        self.log(f"  {why}: {before.describe()} -> {config.describe()} by {res.mode}, {res.downtime_s:.2f} s down")
        return True

    def _heap_mb(self, t0: float) -> float:
        if self.source is None:
            return float("nan")
        w = self.source.fetch(self.job, int(t0 * 1000), int(time.time() * 1000) + 1)
        heap = w.loc[w["metric"] == "heapUsedMb", "value"]
        return float(heap.mean()) if len(heap) else float("nan")

    def profile(self, configs: list[Configuration], rate: float, now: float) -> None:
        """The loop's ``Profiler`` stage: ramp ``configs`` (``rate`` and ``now`` are not needed, see the class doc)."""
        self(configs, rate)

    def __call__(self, configs: list[Configuration], rate: float) -> None:
        t0 = time.time()
        before, before_rate = self.realizer.config, self.rate_file.get()
        self.log(f"profiling {[c.parallelism for c in configs]} near saturation")
        try:
            for cfg in sorted(configs, key=lambda c: c.parallelism):
                start = self.start_rate(cfg.parallelism)
                if self._apply(cfg, "profiling rescale"):
                    self.rate_file.set(start)
                    time.sleep(self.warmup_s)
                ts = time.time()
                est, steps, frames = ramp_to_saturation(
                    self.realizer.control,
                    self.rate_file,
                    cfg,
                    start,
                    source=self.source,
                    cpu=self.cpu,
                    max_steps=self.max_steps,
                    settle_s=self.settle_s,
                    measure_s=self.measure_s,
                    log=self.log,
                )
                heap = self._heap_mb(ts)
                for i, st in enumerate(steps, 1):
                    self.observations.append(
                        observation_row(
                            self.job, cfg, st, memory_used_mb=heap, run_id=f"ramp-p{cfg.parallelism}-{len(self.estimates)}-{i}"
                        )
                    )
                    self.steps.append(dict(st.to_dict(), parallelism=cfg.parallelism, step=i))
                self.frames.append(frames.assign(parallelism=cfg.parallelism))
                self.estimates.append(est)
                self.capacity.record(est)
                self.log(
                    f"  p={cfg.parallelism}: capacity {est.capacity:,.0f} rec/s ({est.method}, trusted={est.trusted}); "
                    f"busy-time estimate at the highest unsaturated step {est.busy_capacity:,.0f} rec/s "
                    f"({est.busy_overestimate:+.0%})"
                )
            if self.measure_recovery and self.recovery_s is None:
                self._recovery(sorted(configs, key=lambda c: c.parallelism)[-1])
        finally:
            self._apply(before, "back after profiling")
            self.rate_file.set(before_rate)
            self.periods.append((t0, time.time()))
            self.write()
        self.log(f"profiling took {time.time() - t0:.0f} s")

    def _recovery(self, config: Configuration) -> None:
        """One TaskManager kill at ``config`` and half its capacity: the recovery time the surrogate needs."""
        est = self.capacity.profiled.get(config.parallelism)
        rate = 0.5 * est.capacity if est else self.first_rate
        self.rate_file.set(rate)
        time.sleep(10)
        rec = inject_taskmanager_failure(self.realizer.cluster, self.realizer.control, timeout_s=150)
        # Not recovered within the timeout: plan with the timeout (a lower bound), record no measurement.
        self.recovery_s = rec.recovery_s
        self.log(
            f"  failure at p={config.parallelism}, {rate:,.0f} rec/s: detected +{rec.detected_s}s, running again "
            f"+{rec.running_again_s}s, "
            + (f"recovered +{rec.recovery_s:.1f}s" if rec.recovered else f"NOT recovered within {rec.recovery_s:.0f} s")
        )
        if not rec.recovered:
            return
        row = {
            "job": self.job,
            "run_id": f"failure-p{config.parallelism}",
            "ts_ms": int(time.time() * 1000),
            **config.to_dict(),
            "input_rate": rate,
            "throughput": rec.pre_failure_rate,
            "latency_ms": np.nan,
            "recovery_s": rec.recovery_s,
            "cpu_used": np.nan,
            "memory_used_mb": np.nan,
        }
        self.observations.append(row)

    def write(self) -> None:
        """Rewrite observations.csv (``PROFILING_COLUMNS``), profiling_steps.csv and the step recordings."""
        self.out_dir.mkdir(parents=True, exist_ok=True)
        tables = {
            "observations.csv": pd.DataFrame(self.observations, columns=list(PROFILING_COLUMNS)),
            "profiling_steps.csv": pd.DataFrame(self.steps),
            "profiling_snapshots.csv": pd.concat(self.frames, ignore_index=True) if self.frames else pd.DataFrame(),
        }
        for name, df in tables.items():
            atomic_write_with(self.out_dir / name, partial(df.to_csv, index=False))


@dataclass
class WithoutProfiling:
    """A ``MetricsSource`` hiding samples from ``periods`` ((start, end) epoch s) and ``margin_s`` after each.

    Pass the profiler's own ``periods`` list: it grows as profiling runs, and the view follows.
    """

    source: Any
    periods: list[tuple[float, float]]
    margin_s: float = 60.0

    def fetch(self, job: str, start_ms: int, end_ms: int) -> pd.DataFrame:
        df = self.source.fetch(job, start_ms, end_ms)
        for a, b in self.periods:
            df = df[(df["ts_ms"] < a * 1000) | (df["ts_ms"] >= (b + self.margin_s) * 1000)]
        return df.reset_index(drop=True)
