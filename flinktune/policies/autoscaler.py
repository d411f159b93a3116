"""The Flink Kubernetes Operator's autoscaler (FLIP-271), with its published defaults.

Facts carried over (ANCHORS.md section 3, ``AutoScalerOptions`` defaults): metrics are collected
after a ``stabilization`` of 5 min following a (re)start, and a decision needs a full 15 min
``metrics window``. Per vertex, TRUE_PROCESSING_RATE = input rate / busy fraction; the source's
target rate is the input rate plus the lag's growth; downstream targets follow the edges. The
target capacity is ``catch-up rate + target x restart time / catch-up duration + target / target
utilisation`` (utilisation 0.7, restart 5 min, catch-up 30 min). A vertex is rescaled only when
its true rate leaves [capacity at utilisation 0.7 + 0.3 without the restart term, capacity at
0.7 - 0.3 with it]; while the backlog exceeds 5 min of input the bounds become [1.0, 0] (only
scale-ups). New parallelism = ceil(p x capacity / true rate), the factor clamped to
[1 - 0.6, 1 + 100000]. Scale-downs wait for the 1 h ``scale-down.interval`` and then use the
largest parallelism recommended in it; scale-ups go at once. Only parallelism changes (memory
tuning is off by default), applied per vertex through ``pipeline.jobvertex-parallelism-overrides``.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass, field

import numpy as np

from flinktune.config_space import ConfigSpace, Configuration
from flinktune.decision import Action, Decision, JobState
from flinktune.decision.stages import PolicyContext
from flinktune.policies.grid import snap_parallelism, vertex_targets

__all__ = ["AutoscalerPolicy"]


@dataclass
class AutoscalerPolicy:
    """Stateful: remembers the metric window, the last restart and pending scale-downs."""

    space: ConfigSpace
    target_utilization: float = 0.7
    utilization_boundary: float = 0.3
    metrics_window_s: float = 900.0
    stabilization_s: float = 300.0
    catch_up_s: float = 1800.0
    restart_s: float = 300.0
    scale_down_interval_s: float = 3600.0
    scale_down_max_factor: float = 0.6
    scale_up_max_factor: float = 100000.0
    backlog_threshold_s: float = 300.0
    per_vertex: bool = True
    name: str = "autoscaler"
    _window: deque = field(default_factory=deque, repr=False)
    _config: Configuration | None = field(default=None, repr=False)
    _since: float = field(default=-math.inf, repr=False)
    _pending_down: tuple[float, int] | None = field(default=None, repr=False)

    def _observe(self, state: JobState) -> None:
        if state.config != self._config:  # a (re)configuration restarts collection
            self._config, self._since = state.config, state.ts
            self._window.clear()
            self._pending_down = None
        if state.running and state.vertices and not state.problems:
            self._window.append(state)
        while self._window and state.ts - self._window[0].ts > self.metrics_window_s:
            self._window.popleft()

    def _capacity(self, target: float, catch_up: float, util: float, with_restart: bool) -> float:
        if util <= 0:
            return math.inf
        restart = target * self.restart_s / self.catch_up_s if with_restart else 0.0
        return catch_up + restart + target / util

    def decide(self, state: JobState, context: PolicyContext) -> Decision:
        self._observe(state)
        age = state.ts - self._since
        if age < self.stabilization_s:
            return Decision.keep(self.name, f"stabilizing after the last (re)start: {age:.0f} of {self.stabilization_s:.0f} s")
        collected = [s for s in self._window if s.ts - self._since >= self.stabilization_s]
        span = (collected[-1].ts - collected[0].ts + collected[0].window_s) if collected else 0.0
        if span < self.metrics_window_s:
            return Decision.keep(self.name, f"collecting metrics: {span:.0f} of the {self.metrics_window_s:.0f} s window")
        names = [v.name for v in state.vertices]
        tpr = np.array([np.mean([s.vertex(n).true_processing_rate for s in collected]) for n in names])
        rate = float(np.mean([s.input_rate for s in collected]))
        growth = float(np.mean([s.lag_growth for s in collected]))
        source_target = max(rate + growth, 0.0)
        targets = np.array(vertex_targets(state.vertices, source_target))
        lag = max(state.lag, 0.0) if np.isfinite(state.lag) else 0.0
        catch_up = np.array(vertex_targets(state.vertices, lag / self.catch_up_s))
        backlog = lag > self.backlog_threshold_s * max(rate, 1.0)
        hi_u, lo_u = (
            (1.0, 0.0)
            if backlog
            else (self.target_utilization + self.utilization_boundary, self.target_utilization - self.utilization_boundary)
        )
        cur = state.config
        cur_p = np.array([s.parallelism for s in state.vertices])
        new_p, reasons = cur_p.copy(), []
        for k, n in enumerate(names):
            if not np.isfinite(tpr[k]):
                continue
            upper = self._capacity(targets[k], catch_up[k], hi_u, False)
            lower = self._capacity(targets[k], catch_up[k], lo_u, True)
            if upper <= tpr[k] <= lower:
                continue
            cap = self._capacity(targets[k], catch_up[k], self.target_utilization, True)
            factor = float(np.clip(cap / tpr[k], 1 - self.scale_down_max_factor, 1 + self.scale_up_max_factor))
            new_p[k] = max(1, math.ceil(factor * cur_p[k] - 1e-9))
            reasons.append(f"{n}: true rate {tpr[k]:,.0f} outside [{upper:,.0f}, {lower:,.0f}] -> p{new_p[k]}")
        inputs = {"planned_rate": source_target, "true_rates": dict(zip(names, tpr.tolist())), "backlog": bool(backlog)}
        if not reasons:
            self._pending_down = None
            return Decision.keep(
                self.name, f"every vertex's true rate is within the utilisation bounds at {source_target:,.0f} rec/s", **inputs
            )
        job_p = snap_parallelism(self.space, float(new_p.max()), cur.task_slots)
        if job_p < cur.parallelism:
            first, peak = self._pending_down or (state.ts, job_p)
            self._pending_down = (first, max(peak, job_p))
            waited = state.ts - first
            if waited < self.scale_down_interval_s:
                return Decision.keep(
                    self.name,
                    f"scale-down to p{job_p} delayed: recommended for {waited:.0f} of {self.scale_down_interval_s:.0f} s ({'; '.join(reasons)})",
                    **inputs,
                )
            job_p = self._pending_down[1]
            new_p = np.minimum(new_p, job_p)
        else:
            self._pending_down = None
        overrides = {n: int(p) for n, p in zip(names, new_p) if p < job_p} if self.per_vertex else {}
        target = cur.with_(parallelism=job_p, vertex_parallelism=overrides)
        if target == cur:
            return Decision.keep(self.name, f"recommended parallelism equals the running one ({'; '.join(reasons)})", **inputs)
        return Decision(
            Action.RECONFIGURE,
            f"autoscaler: {'; '.join(reasons)}; job parallelism {cur.parallelism} -> {job_p}",
            self.name,
            target=target,
            inputs=inputs,
        )
