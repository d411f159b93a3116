"""The twin: a simulated Flink job on Kubernetes that emits the metrics a real one would.

Use :class:`TwinJob` wherever a real job would be (demo, tests, replay benchmark, profiling,
what-if): ``run(rates)`` advances one second per rate value and returns raw-schema samples;
``apply(config)`` reconfigures (no-op, in-place rescale or savepoint redeploy, with downtime);
``history()`` is the compact per-second summary; ``state_dict()``/``from_state_dict()`` and
``save()``/``load()`` persist a twin between Airflow tasks and resume it exactly.

Same seed, same inputs, same calls => identical output, however the run is chunked: every random
draw is a pure function of (seed, stream, second) (:mod:`flinktune.twin.noise`).
"""

from __future__ import annotations

import json
from collections import deque
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from flinktune.config_space import Configuration
from flinktune.lake.atomic import atomic_parquet, atomic_write
from flinktune.metrics.schema import CONFIG_METRICS, empty_frame
from flinktune.twin import mechanics as mech
from flinktune.twin.emit import Series, raw_frame
from flinktune.twin.engine import Dynamics, StepInputs
from flinktune.twin.failures import parse_failures
from flinktune.twin.imbalance import Imbalance, SubtaskLoads, subtask_loads
from flinktune.twin.noise import normal, uniform
from flinktune.twin.profile import ClusterProfile

__all__ = ["DEFAULT_START_TS", "HISTORY_COLUMNS", "TwinJob"]

#: Default simulated start: 2024-01-01T00:00:00Z.
DEFAULT_START_TS = 1_704_067_200

HISTORY_COLUMNS: tuple[str, ...] = (
    "ts",
    "rate",
    "throughput",
    "lag",
    "latency_p50_ms",
    "latency_p95_ms",
    "latency_p99_ms",
    "cpu_used",
    "memory_used_mb",
    "running",
    "taskmanagers",
    "total_cpu",
    "total_memory_mb",
    "parallelism",
    "task_slots",
    "cpu",
    "memory_mb",
    "checkpoint_interval_s",
    "capacity",
    "restarts",
    "checkpoint_duration_ms",
    "checkpoint_size_bytes",
)

_STATE_VERSION = 1


class TwinJob:
    """One simulated job: configuration in force, dynamic state and what it emitted.

    ``failures``: ``"none"``, ``"every:45m"`` or ``"random:2/h"`` (:mod:`flinktune.twin.failures`).
    ``detail``: ``"vertex"`` (per-vertex samples, subtask -1) or ``"subtask"`` (one sample per
    subtask; many rows, for short runs). ``retain_s``: seconds of emitted samples kept in memory
    for :meth:`samples` (the twin's metrics endpoint). ``imbalance``: a planted hot key and/or
    slow TaskManager (:mod:`flinktune.twin.imbalance`); None (the default) is a balanced job.
    ``reactive``: the job runs in Flink's reactive mode (the parallelism follows the TaskManagers):
    every parallelism change restarts it from its last completed checkpoint (``apply`` reports
    mode ``restart``), and a fault that takes a TaskManager away restarts it twice: at once without
    that TaskManager, and again when it registers back ``profile.tm_rejoin_s`` after the fault.
    """

    def __init__(
        self,
        profile: ClusterProfile,
        config: Configuration,
        *,
        job: str = "demo",
        seed: int = 0,
        start_ts: int = DEFAULT_START_TS,
        failures: str = "none",
        detail: str = "vertex",
        retain_s: int = 7200,
        imbalance: Imbalance | None = None,
        reactive: bool = False,
    ) -> None:
        if detail not in ("vertex", "subtask"):
            raise ValueError(f"detail must be 'vertex' or 'subtask', got {detail!r}")
        mech.layout(profile, config)  # validates vertex overrides
        if imbalance is not None:
            imbalance.check(profile.dataflow)
        self.imbalance = imbalance if imbalance is not None and imbalance.active else None
        self.reactive = bool(reactive)
        self.profile, self.config, self.job, self.seed = profile, config, job, int(seed)
        self.start_ts, self.detail, self.retain_s = int(start_ts), detail, int(retain_s)
        self.failures = parse_failures(failures).spec
        sched = parse_failures(failures)
        self._dyn = Dynamics(t=self.start_ts, ckpt_next=self.start_ts + config.checkpoint_interval_s)
        if sched.period_s:
            self._dyn.fail_period_s = sched.period_s
            self._dyn.fail_nominal_next = self.start_ts + sched.period_s
        self._random_rate = sched.rate_per_s
        self._last_rate = 0.0
        self.reconfigurations: list[dict[str, Any]] = []
        self._history: list[dict[str, np.ndarray]] = []
        self._emitted: deque[pd.DataFrame] = deque()

    # ------------------------------------------------------------------ time and control
    @property
    def now(self) -> int:
        """Epoch second the next ``run`` starts at."""
        return self._dyn.t

    @property
    def lag(self) -> float:
        return self._dyn.lag

    @property
    def restarts(self) -> int:
        return self._dyn.restarts

    @property
    def last_reconfiguration(self) -> dict[str, Any] | None:
        return self.reconfigurations[-1] if self.reconfigurations else None

    def apply(self, config: Configuration, *, mode: str = "auto") -> float:
        """Reconfigure from the next second on; returns the downtime in seconds (0 for a no-op).

        ``mode``: ``auto`` (rescale in place when only parallelism changes and the adaptive
        scheduler is on, else savepoint + redeploy), ``rescale`` or ``redeploy`` (forced).
        Input keeps arriving during the downtime and becomes lag.
        """
        mech.layout(self.profile, config)
        size = float(mech.state_mb(self.profile, self._last_rate)[0])
        kind, down = mech.reconfiguration(self.profile, self.config, config, size, mode)
        if self.reactive and kind == "rescale":
            # Reactive mode has no in-place rescale: the job restarts from its last completed
            # checkpoint at the parallelism the TaskManagers now offer (new pods start first).
            kind, down = "restart", mech.restart_downtime_s(self.profile, self.config, config, size)
        record = {"ts": self.now, "mode": kind, "downtime_s": down, "from": self.config.to_dict(), "to": config.to_dict()}
        if kind == "noop":
            self.reconfigurations.append(record)
            return 0.0
        d = self._dyn
        if kind == "restart" or (kind == "rescale" and self.profile.rescale_replays_from_checkpoint):
            d.lag += d.consumed - d.ckpt_offset
            d.consumed = d.ckpt_offset
        else:
            d.ckpt_offset = d.consumed  # the savepoint (or a fresh checkpoint) is the restore point
        # A rescale restarts the job in TaskManagers that keep running (warm JVMs): its own warm-up;
        # a redeploy starts new pods (cold JVMs): its own too (None: warmup_s, as a failure's).
        warm = self.profile.rescale_warmup_s if kind in ("restart", "rescale") else self.profile.redeploy_warmup_s
        d.restart(max(float(d.t), d.down_until) + down, config.checkpoint_interval_s, warm)
        self.config = config
        self.reconfigurations.append(record)
        return down

    def inject_failure(self, at_ts: int | None = None) -> int:
        """Schedule a failure at ``at_ts`` or, by default, just before the next checkpoint is due; returns its time."""
        d = self._dyn
        when = (
            d.arm_time(self.now, self.config.checkpoint_interval_s, self.profile.failure_lead_s) if at_ts is None else int(at_ts)
        )
        if when < self.now:
            raise ValueError(f"cannot inject a failure in the past ({when} < now {self.now})")
        d.fail_at = sorted([*d.fail_at, when])
        return when

    # ------------------------------------------------------------------ simulation
    def run(self, rates: np.ndarray | pd.Series, *, emit: bool = True) -> pd.DataFrame:
        """Advance one second per rate (rec/s); return the raw samples of those seconds.

        A Series contributes its values only (the twin's clock decides the timestamps). With
        ``emit=False`` nothing is built or retained and an empty frame is returned (profiling,
        oracle); :meth:`history` is kept either way.
        """
        r = np.asarray(rates.to_numpy() if isinstance(rates, pd.Series) else rates, dtype=float).ravel()
        bad = np.flatnonzero(~np.isfinite(r) | (r < 0))
        if bad.size:
            raise ValueError(f"rates: value {r[bad[0]]!r} at position {int(bad[0])} is not a finite rate >= 0")
        if r.size == 0:
            return empty_frame()
        prof, cfg = self.profile, self.config
        lay = mech.layout(prof, cfg)
        ts = self.now + np.arange(r.size, dtype=np.int64)
        pressure = mech.memory_pressure(prof, lay, r)
        gc = mech.gc_factor(prof, pressure)
        cap = mech.capacity(lay, gc)
        loads = self._subtask_loads(lay)
        if loads is not None:
            cap = cap / loads.slowdown  # the slowest thread (hot key, slow host) sets the pace
        size, dur, pause = mech.checkpoint(prof, lay, r)
        fdown = mech.failure_downtime_s(prof, lay, 0.0) + size / (prof.restore_mb_s * cfg.parallelism)
        p_fail = mech.oom_rate_per_s(prof, pressure) + self._random_rate
        rand_fail = uniform(self.seed, "failure", ts) < p_fail
        out = self._dyn.advance(
            StepInputs(
                rates=r,
                capacity=cap,
                ckpt_duration_s=dur,
                ckpt_pause_s=pause,
                ckpt_size_mb=size,
                failure_downtime_s=fdown,
                random_failure=rand_fail,
                interval_s=cfg.checkpoint_interval_s,
                async_overhead=prof.checkpoint_async_overhead,
                warmup_s=prof.warmup_s,
                warmup_initial=prof.warmup_initial_capacity,
                lead_s=prof.failure_lead_s,
                rejoin_s=prof.tm_rejoin_s if self.reactive else 0.0,
                rejoin_downtime_s=fdown - prof.failure_detection_s,
            )
        )
        self._last_rate = float(r[-1])
        thr, lag, running = out.throughput, out.lag, out.running
        wait_ms = (lag / cap + out.down_remaining_s) * 1000.0
        p50, p95, p99 = mech.latency_quantiles(prof, lay, thr / cap, wait_ms, gc, out.pause_s, normal(self.seed, "latency", ts))
        cpu = mech.cpu_used(prof, lay, thr, gc) * np.exp(prof.cpu_noise * normal(self.seed, "cpu", ts))
        mem = mech.memory_used(prof, lay, thr, r) * np.exp(prof.memory_noise * normal(self.seed, "memory", ts))
        n = r.size
        hist = {
            "ts": ts,
            "rate": r,
            "throughput": thr,
            "lag": lag,
            "latency_p50_ms": p50,
            "latency_p95_ms": p95,
            "latency_p99_ms": p99,
            "cpu_used": np.minimum(cpu, cfg.total_cpu),
            "memory_used_mb": mem,
            "running": running,
            "taskmanagers": np.full(n, cfg.taskmanagers, float),
            "total_cpu": np.full(n, cfg.total_cpu, float),
            "total_memory_mb": np.full(n, cfg.total_memory_mb, float),
            "parallelism": np.full(n, cfg.parallelism, float),
            "task_slots": np.full(n, cfg.task_slots, float),
            "cpu": np.full(n, cfg.cpu, float),
            "memory_mb": np.full(n, cfg.memory_mb, float),
            "checkpoint_interval_s": np.full(n, cfg.checkpoint_interval_s, float),
            "capacity": cap,
            "restarts": out.restarts,
            "checkpoint_duration_ms": out.ckpt_duration_ms,
            "checkpoint_size_bytes": out.ckpt_size_bytes,
        }
        self._history.append(hist)
        if not emit:
            return empty_frame()
        frame = raw_frame(self.job, ts, self._series(lay, hist, out.effective_capacity, loads))
        self._retain(frame)
        return frame

    def _subtask_loads(self, lay: mech.Layout) -> SubtaskLoads | None:
        if self.imbalance is None:
            return None
        return subtask_loads(self.imbalance, lay.vertices, lay.parallelism, lay.a, self.config.task_slots)

    def _series(
        self, lay: mech.Layout, h: dict[str, np.ndarray], eff_cap: np.ndarray, loads: SubtaskLoads | None = None
    ) -> list[Series]:
        cfg, n = self.config, len(h["ts"])
        thr, run = h["throughput"], h["running"]
        const = lambda v: np.full(n, float(v))  # noqa: E731
        out: list[Series] = [
            ("workloadRate", "", -1, h["rate"]),
            ("pendingRecords", "", -1, h["lag"]),
            ("latencyP50Ms", "", -1, h["latency_p50_ms"]),
            ("latencyP95Ms", "", -1, h["latency_p95_ms"]),
            ("latencyP99Ms", "", -1, h["latency_p99_ms"]),
            ("cpuLoad", "", -1, h["cpu_used"]),
            ("heapUsedMb", "", -1, h["memory_used_mb"]),
            ("lastCheckpointDurationMs", "", -1, h["checkpoint_duration_ms"]),
            ("lastCheckpointSizeBytes", "", -1, h["checkpoint_size_bytes"]),
            ("numRestarts", "", -1, h["restarts"]),
            ("jobRunning", "", -1, run),
            ("taskManagers", "", -1, const(cfg.taskmanagers)),
            ("taskSlotsTotal", "", -1, const(cfg.taskmanagers * cfg.task_slots)),
        ]
        for knob, metric in CONFIG_METRICS.items():
            out.append((metric, "", -1, const(getattr(cfg, knob))))
        with np.errstate(divide="ignore", invalid="ignore"):
            load = np.where(eff_cap > 0, thr / eff_cap, 0.0)
        saturated = (h["lag"] > 0.5) | (load >= 0.999)
        if loads is not None:
            out.extend(self._imbalanced_series(lay, h, load, saturated, loads))
            return out
        for k, v in enumerate(lay.vertices):
            spec = self.profile.dataflow.vertices[k]
            rec_in = thr * lay.input_share[k]
            busy = np.minimum(1000.0 * load * lay.ratio[k], 1000.0) * run
            bp = np.where(saturated & (k < lay.bottleneck), 1000.0 - busy, 0.0) * run
            idle = (1000.0 - busy - bp) * run
            per = [
                ("numRecordsInPerSecond", rec_in),
                ("numRecordsOutPerSecond", rec_in * spec.selectivity),
                ("busyTimeMsPerSecond", busy),
                ("backPressuredTimeMsPerSecond", bp),
                ("idleTimeMsPerSecond", idle),
            ]
            if self.detail == "vertex":
                out.extend((m, v, -1, arr) for m, arr in per)
            else:
                pv = int(lay.parallelism[k])
                for sub in range(pv):
                    out.extend((m, v, sub, arr / pv if m.startswith("numRecords") else arr) for m, arr in per)
        return out

    def _imbalanced_series(
        self, lay: mech.Layout, h: dict[str, np.ndarray], load: np.ndarray, saturated: np.ndarray, loads: SubtaskLoads
    ) -> list[Series]:
        """Per-subtask time and record series when an imbalance is planted (unequal siblings).

        The slowest thread is busy ``load`` of each second; every other thread in proportion to
        its own load. When saturated, all vertices upstream of the slowest thread's vertex are
        backpressured (a full channel blocks each sender), the rest idle when not busy.
        """
        thr, run, ts = h["throughput"], h["running"], h["ts"]
        noise = self.imbalance.metric_noise if self.imbalance is not None else 0.0
        out: list[Series] = []
        lane = 0
        for k, v in enumerate(lay.vertices):
            sel = self.profile.dataflow.vertices[k].selectivity
            per_sub: list[list[tuple[str, np.ndarray]]] = []
            for rshare, ratio in zip(loads.records[k], loads.ratio[k]):
                busy = np.minimum(1000.0 * load * ratio, 1000.0)
                if noise > 0:
                    busy = np.minimum(busy * np.exp(noise * normal(self.seed, "busy", ts, lane=lane)), 1000.0)
                lane += 1
                busy = busy * run
                bp = np.where(saturated & (k < loads.bottleneck[0]), 1000.0 - busy, 0.0) * run
                rec_in = thr * lay.input_share[k] * rshare
                per_sub.append(
                    [
                        ("numRecordsInPerSecond", rec_in),
                        ("numRecordsOutPerSecond", rec_in * sel),
                        ("busyTimeMsPerSecond", busy),
                        ("backPressuredTimeMsPerSecond", bp),
                        ("idleTimeMsPerSecond", (1000.0 - busy - bp) * run),
                    ]
                )
            if self.detail == "subtask":
                for sub, per in enumerate(per_sub):
                    out.extend((m, v, sub, arr) for m, arr in per)
            else:  # vertex level: records summed, times of the busiest subtask (the autoscaler's MAX)
                arrays = {m: np.stack([dict(p)[m] for p in per_sub]) for m, _ in per_sub[0]}
                top = np.argmax(arrays["busyTimeMsPerSecond"], axis=0)
                cols = np.arange(top.size)
                for m, arr in arrays.items():
                    out.append((m, v, -1, arr.sum(axis=0) if m.startswith("numRecords") else arr[top, cols]))
        return out

    def _retain(self, frame: pd.DataFrame) -> None:
        self._emitted.append(frame)
        horizon_ms = (self.now - self.retain_s) * 1000
        while len(self._emitted) > 1 and int(self._emitted[0]["ts_ms"].iloc[-1]) < horizon_ms:
            self._emitted.popleft()

    def samples(self, start_ms: int | None = None, end_ms: int | None = None) -> pd.DataFrame:
        """Retained emitted samples with ``start_ms <= ts_ms < end_ms`` (the twin's metrics endpoint)."""
        if not self._emitted:
            return empty_frame()
        df = pd.concat(list(self._emitted), ignore_index=True)
        mask = np.ones(len(df), dtype=bool)
        if start_ms is not None:
            mask &= df["ts_ms"].to_numpy() >= start_ms
        if end_ms is not None:
            mask &= df["ts_ms"].to_numpy() < end_ms
        return df[mask].reset_index(drop=True)

    def history(self) -> pd.DataFrame:
        """Per-second summary of everything run so far (:data:`HISTORY_COLUMNS`; ``ts`` is UTC)."""
        if not self._history:
            return pd.DataFrame({c: pd.Series(dtype=float) for c in HISTORY_COLUMNS}).assign(
                ts=pd.Series(dtype="datetime64[ns, UTC]")
            )
        cols = {c: np.concatenate([h[c] for h in self._history]) for c in HISTORY_COLUMNS}
        df = pd.DataFrame(cols, columns=list(HISTORY_COLUMNS))
        df["ts"] = pd.to_datetime(df["ts"], unit="s", utc=True)
        return df

    def steady_state(self, config: Configuration | None = None, rate: float = 0.0) -> dict[str, float]:
        """Analytic steady state of ``config`` (default: the one in force) at a constant ``rate``.

        Keys: throughput, latency_ms (p95), cpu_used, memory_used_mb, recovery_s, capacity, and
        latency_p50_ms, latency_p99_ms, memory_pressure.
        """
        res = mech.steady_state(self.profile, config or self.config, float(rate))
        return {k: float(v[0]) for k, v in res.items()}

    # ------------------------------------------------------------------ persistence
    def state_dict(self, *, with_history: bool = False) -> dict[str, Any]:
        """JSON-serialisable state; :meth:`from_state_dict` resumes exactly where this left off."""
        d: dict[str, Any] = {
            "version": _STATE_VERSION,
            "profile": self.profile.model_dump(mode="json"),
            "config": self.config.to_dict(),
            "job": self.job,
            "seed": self.seed,
            "start_ts": self.start_ts,
            "failures": self.failures,
            "detail": self.detail,
            "retain_s": self.retain_s,
            "last_rate": self._last_rate,
            "dynamics": self._dyn.to_dict(),
            "reconfigurations": self.reconfigurations,
        }
        if self.imbalance is not None:  # only when planted: balanced twins save exactly as before
            d["imbalance"] = self.imbalance.to_dict()
        if self.reactive:
            d["reactive"] = True
        if with_history:
            d["history"] = [{k: v.tolist() for k, v in h.items()} for h in self._history]
        return d

    @classmethod
    def from_state_dict(cls, d: dict[str, Any]) -> TwinJob:
        """Rebuild a twin saved by :meth:`state_dict` (same random stream, same clock)."""
        if d.get("version") != _STATE_VERSION:
            raise ValueError(f"twin state: unsupported version {d.get('version')!r}; expected {_STATE_VERSION}")
        twin = cls(
            ClusterProfile.model_validate(d["profile"]),
            Configuration.from_dict(d["config"], where="twin state 'config'"),
            job=d["job"],
            seed=d["seed"],
            start_ts=d["start_ts"],
            failures=d["failures"],
            detail=d["detail"],
            retain_s=d["retain_s"],
            imbalance=Imbalance.from_dict(d["imbalance"], "twin state 'imbalance'") if d.get("imbalance") else None,
            reactive=bool(d.get("reactive", False)),
        )
        twin._dyn = Dynamics.from_dict(d["dynamics"])
        twin._last_rate = float(d["last_rate"])
        twin.reconfigurations = list(d["reconfigurations"])
        for h in d.get("history", []):
            twin._history.append({k: np.asarray(v, dtype=np.int64 if k == "ts" else float) for k, v in h.items()})
        return twin

    def save(self, path: str | Path) -> Path:
        """Write the state as JSON atomically (temp file + rename); history goes to ``<path>.history.parquet``."""
        path = Path(path)
        if self._history:
            h = self.history()
            h["ts"] = h["ts"].astype("int64") // 10**9
            atomic_parquet(h, path.with_name(path.name + ".history.parquet"))
        return atomic_write(path, json.dumps(self.state_dict()).encode())

    @classmethod
    def load(cls, path: str | Path) -> TwinJob:
        """Read a twin written by :meth:`save` (with its history when present)."""
        path = Path(path)
        try:
            d = json.loads(path.read_text())
        except (OSError, json.JSONDecodeError) as exc:
            raise ValueError(f"{path}: cannot read twin state: {exc}") from None
        twin = cls.from_state_dict(d)
        hist_path = path.with_name(path.name + ".history.parquet")
        if hist_path.exists():
            h = pd.read_parquet(hist_path)
            twin._history = [{c: h[c].to_numpy(dtype=np.int64 if c == "ts" else float) for c in HISTORY_COLUMNS}]
        return twin
