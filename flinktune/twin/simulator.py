"""The twin: a simulated Flink job on Kubernetes that emits the metrics a real one would.

Use :class:`TwinJob` wherever a real job would be (demo, tests, replay benchmark, profiling,
what-if): ``run(rates)`` advances one second per rate value and returns raw-schema samples;
``apply(config)`` reconfigures (no-op, in-place rescale or savepoint redeploy, with downtime);
``history()`` is the compact per-second summary; ``state_dict()``/``from_state_dict()`` and
``save()``/``load()`` persist a twin between Airflow tasks and resume it exactly.

Same seed, same inputs, same calls => identical output, however the run is chunked: every random
draw is a pure function of (seed, stream, second) (:mod:`flinktune.twin.noise`).

This module holds the job object: its clock, configuration, control calls and persistence. The
pieces it composes live beside it: the mechanisms (:mod:`~flinktune.twin.mechanics`), the
per-second state loop (:mod:`~flinktune.twin.engine`), the per-second summary and its files
(:mod:`~flinktune.twin.history`, whose ``HISTORY_COLUMNS`` is re-exported here) and the emitted
series (:mod:`~flinktune.twin.metric_series`).
"""

from __future__ import annotations

import json
from collections import deque
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from flinktune.config_space import Configuration
from flinktune.lake.atomic import atomic_write
from flinktune.metrics.schema import empty_frame
from flinktune.twin import mechanics as mech
from flinktune.twin.emit import raw_frame
from flinktune.twin.engine import Dynamics, StepInputs
from flinktune.twin.failures import parse_failures
from flinktune.twin.history import (
    HISTORY_COLUMNS,
    HistoryChunk,
    chunks_from_json,
    chunks_to_json,
    history_chunk,
    history_frame,
    read_history_parquet,
    write_history_parquet,
)
from flinktune.twin.imbalance import Imbalance, SubtaskLoads, subtask_loads
from flinktune.twin.metric_series import job_series, task_series
from flinktune.twin.noise import normal, uniform
from flinktune.twin.profile import ClusterProfile

__all__ = ["DEFAULT_START_TS", "HISTORY_COLUMNS", "TwinJob"]

#: Default simulated start: 2024-01-01T00:00:00Z.
DEFAULT_START_TS = 1_704_067_200

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
        self._history: list[HistoryChunk] = []
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
        thr, lag = out.throughput, out.lag
        wait_ms = (lag / cap + out.down_remaining_s) * 1000.0
        p50, p95, p99 = mech.latency_quantiles(prof, lay, thr / cap, wait_ms, gc, out.pause_s, normal(self.seed, "latency", ts))
        cpu = mech.cpu_used(prof, lay, thr, gc) * np.exp(prof.cpu_noise * normal(self.seed, "cpu", ts))
        mem = mech.memory_used(prof, lay, thr, r) * np.exp(prof.memory_noise * normal(self.seed, "memory", ts))
        hist = history_chunk(cfg, ts, r, cap, out, (p50, p95, p99), np.minimum(cpu, cfg.total_cpu), mem)
        self._history.append(hist)
        if not emit:
            return empty_frame()
        noise = self.imbalance.metric_noise if self.imbalance is not None else 0.0
        series = job_series(cfg, hist) + task_series(
            prof.dataflow, lay, hist, out.effective_capacity, detail=self.detail, loads=loads, seed=self.seed, metric_noise=noise
        )
        frame = raw_frame(self.job, ts, series)
        self._retain(frame)
        return frame

    def _subtask_loads(self, lay: mech.Layout) -> SubtaskLoads | None:
        if self.imbalance is None:
            return None
        return subtask_loads(self.imbalance, lay.vertices, lay.parallelism, lay.a, self.config.task_slots)

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
        return history_frame(self._history)

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
            d["history"] = chunks_to_json(self._history)
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
        twin._history.extend(chunks_from_json(d.get("history", [])))
        return twin

    def save(self, path: str | Path) -> Path:
        """Write the state as JSON atomically (temp file + rename); history goes to ``<path>.history.parquet``."""
        path = Path(path)
        write_history_parquet(self._history, path)
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
        chunks = read_history_parquet(path)
        if chunks is not None:
            twin._history = chunks
        return twin
