"""The Flink Kubernetes Operator's autoscaler (FLIP-271) as a policy, with the defaults of its published versions.

Use :class:`AutoscalerPolicy` (``make_policy("autoscaler", space)``; :meth:`AutoscalerPolicy.published`
for a version in :data:`VERSIONS`: ``newest``, ``1.6``, ``demeter-1.6``) as the operator baseline of the
replay: per vertex it sizes parallelism from true processing rates with a utilisation target, a restart
and catch-up term and delayed scale-downs, after a stabilization interval and a full metrics window.
What the published autoscaler does, how each version differs and why it behaves as it does in the
replay are in ``docs/baselines.md`` (autoscaler).
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from flinktune.config_space import ConfigSpace, Configuration
from flinktune.decision import Action, Decision, JobState
from flinktune.decision.stages import PolicyContext
from flinktune.policies.grid import snap_parallelism, vertex_targets

__all__ = ["SCALE_DOWN_MODES", "VERSIONS", "AutoscalerPolicy"]

SCALE_DOWN_MODES: tuple[str, ...] = ("interval", "grace")

#: Published behaviours, as constructor options (docs/baselines.md, autoscaler and the 1.6.0 sources cited above).
VERSIONS: dict[str, dict[str, Any]] = {
    # The snapshot of docs/baselines.md, autoscaler (1.10+): the class defaults.
    "newest": {},
    # Operator 1.6.0's AutoScalerOptions defaults, on Flink 1.17 (no in-place rescaling).
    "1.6": {
        "metrics_window_s": 600.0, "stabilization_s": 300.0, "target_utilization": 0.7, "utilization_boundary": 0.4,
        "catch_up_s": 300.0, "restart_s": 180.0, "scale_down_mode": "grace", "scale_up_grace_s": 3600.0,
        "reset_on_restart": True, "rescales_in_place": False, "window_from_first_observation": True,
    },
    # 1.6 as Demeter's evaluation deployed it (FlinkJob.deploymentWithAutoscaler).
    "demeter-1.6": {
        "metrics_window_s": 60.0, "stabilization_s": 120.0, "target_utilization": 0.35, "utilization_boundary": 0.15,
        "catch_up_s": 300.0, "restart_s": 60.0, "scale_down_mode": "grace", "scale_up_grace_s": 3600.0,
        "reset_on_restart": True, "rescales_in_place": False, "window_from_first_observation": True,
    },
}  # fmt: skip


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
    #: ``"interval"``: DelayedScaleDown (operator 1.10+); ``"grace"``: the scale-up grace period (up to 1.9).
    scale_down_mode: str = "interval"
    scale_up_grace_s: float = 3600.0
    #: Key groups (the job's ``pipeline.max-parallelism``) a vertex's parallelism is aligned to; None: no alignment.
    key_groups: int | None = None
    #: A failure restart clears the metrics and starts a new stabilization (operator 1.6 reads the
    #: job's last status change); False: only a reconfiguration does.
    reset_on_restart: bool = False
    #: False when every rescale is a full savepoint upgrade (Flink < 1.18: no in-place rescaling);
    #: the replay harness then runs the twin without its adaptive scheduler.
    rescales_in_place: bool = True
    #: Busy time the operator reads = the twin's x this (``flinktune.calibration.busy``); 1.0: as the twin reports it.
    busy_time_scale: float = 1.0
    #: True: the window is full once ``metrics_window_s`` has passed since the first observation collected
    #: after the stabilization (operator 1.6's collector; each observation is Flink's meter over the minute
    #: before it); False: once the collected windows cover ``metrics_window_s`` (one observation earlier).
    window_from_first_observation: bool = False
    #: Log-normal spread (sigma) of the busy time the operator reads, one draw per vertex and decision
    #: (``flinktune.calibration.busy.calibrate_busy_noise``); 0: the twin's busy time x busy_time_scale exactly.
    busy_time_noise: float = 0.0
    #: Seed of those draws (the replay's seed, so that seeds differ); a draw depends only on (seed, ts, vertex).
    noise_seed: int = 0
    name: str = "autoscaler"
    _window: deque = field(default_factory=deque, repr=False)
    _config: Configuration | None = field(default=None, repr=False)
    _since: float = field(default=-math.inf, repr=False)
    #: Per vertex: the scale-downs recommended since the first one, [(ts, parallelism), ...].
    _pending_down: dict[str, list[tuple[float, int]]] = field(default_factory=dict, repr=False)
    #: Per vertex: its last rescale, (ts, parallelism before, after) (the scaling history, kept over restarts).
    _history: dict[str, tuple[float, int, int]] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        if self.scale_down_mode not in SCALE_DOWN_MODES:
            raise ValueError(f"scale_down_mode {self.scale_down_mode!r}: expected one of {', '.join(SCALE_DOWN_MODES)}")
        if not (self.busy_time_scale > 0 and math.isfinite(self.busy_time_scale)):
            raise ValueError(f"busy_time_scale must be a positive number, got {self.busy_time_scale!r}")
        if not (self.busy_time_noise >= 0 and math.isfinite(self.busy_time_noise)):
            raise ValueError(f"busy_time_noise must be a non-negative number, got {self.busy_time_noise!r}")
        if self.key_groups is not None and self.key_groups < 1:
            raise ValueError(f"key_groups must be at least 1 (or None), got {self.key_groups!r}")

    @classmethod
    def published_options(cls, version: str, space: ConfigSpace | None = None) -> dict[str, Any]:
        """Constructor options of a published version (:data:`VERSIONS`); ``space`` gives the key
        groups of ``demeter-1.6`` (the space's largest parallelism, as Demeter's 24 was its static scale-out)."""
        if version not in VERSIONS:
            raise ValueError(f"unknown operator version {version!r}; known: {', '.join(VERSIONS)}")
        opts: dict[str, Any] = dict(VERSIONS[version])
        if version == "demeter-1.6":
            if space is None:
                raise ValueError("demeter-1.6 needs the configuration space (its key groups are the largest parallelism)")
            opts["key_groups"] = int(max(space.parallelism))
        return opts

    @classmethod
    def published(cls, version: str, space: ConfigSpace, **overrides: Any) -> AutoscalerPolicy:
        """The policy as ``version`` behaves (:meth:`published_options`), with ``overrides`` on top."""
        return cls(space, **{**cls.published_options(version, space), **overrides})

    def _observe(self, state: JobState) -> None:
        restarted = self.reset_on_restart and state.restarts > 0
        if state.config != self._config or restarted:  # a (re)configuration (or restart) restarts collection
            self._config, self._since = state.config, state.ts
            self._window.clear()
            self._pending_down = {}
        if state.running and state.vertices and not state.problems:
            self._window.append(state)
        while self._window and state.ts - self._window[0].ts > self.metrics_window_s:
            self._window.popleft()

    def _noise(self, ts: float, n: int) -> np.ndarray:
        """``n`` standard normal draws for the decision at ``ts`` (a pure function of the seed and ``ts``)."""
        return np.random.default_rng([int(self.noise_seed) & 0xFFFFFFFF, int(ts) & 0xFFFFFFFF]).standard_normal(n)

    def align(self, p: int) -> int:
        """Operator 1.6's key-group alignment: the first parallelism from ``p`` up to half the key
        groups that divides them evenly, else ``p`` (capped at the key groups)."""
        if self.key_groups is None:
            return p
        kg = self.key_groups
        p = min(p, kg)
        for q in range(p, kg // 2 + 1):
            if kg % q == 0:
                return q
        return p

    def recommend(self, parallelism: int, true_rate: float, target_rate: float, catch_up_rate: float) -> tuple[int, float]:
        """(new parallelism, target capacity) of one vertex running at ``parallelism`` with ``true_rate``
        (rec/s at full busy time) for ``target_rate`` plus ``catch_up_rate`` (lag / catch-up duration)."""
        cap = self._capacity(target_rate, catch_up_rate, self.target_utilization, True)
        factor = float(np.clip(cap / true_rate, 1 - self.scale_down_max_factor, 1 + self.scale_up_max_factor))
        return self.align(max(1, math.ceil(factor * parallelism - 1e-9))), cap

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
        if not collected:
            span = 0.0
        elif self.window_from_first_observation:
            span = collected[-1].ts - collected[0].ts
        else:
            span = collected[-1].ts - collected[0].ts + collected[0].window_s
        if span < self.metrics_window_s:
            return Decision.keep(self.name, f"collecting metrics: {span:.0f} of the {self.metrics_window_s:.0f} s window")
        names = [v.name for v in state.vertices]
        # The busy time the operator reads is the twin's x busy_time_scale, so its true rate is divided by it.
        tpr = np.array([np.mean([s.vertex(n).true_processing_rate for s in collected]) for n in names]) / self.busy_time_scale
        if self.busy_time_noise > 0:
            # A noisy busy-time reading: busy x exp(sigma z) divides the true rate by the same factor.
            tpr = tpr / np.exp(self.busy_time_noise * self._noise(state.ts, len(names)))
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
        new_p, changed, reasons, delayed = cur_p.copy(), [], [], []
        for k, n in enumerate(names):
            if not np.isfinite(tpr[k]) or tpr[k] <= 0:
                continue
            want, cap = self.recommend(int(cur_p[k]), float(tpr[k]), float(targets[k]), float(catch_up[k]))
            if want >= cur_p[k]:
                self._pending_down.pop(n, None)  # no change or a scale-up: no scale-down is pending
                if want == cur_p[k]:
                    continue
            elif self.scale_down_mode == "grace":
                last = self._history.get(n)
                if last is not None and last[2] == cur_p[k] and last[2] > last[1] and state.ts - last[0] < self.scale_up_grace_s:
                    delayed.append(
                        f"{n} -> p{want} (within the scale-up grace period: {state.ts - last[0]:.0f} of {self.scale_up_grace_s:.0f} s)"
                    )
                    continue
            else:
                recs = self._pending_down.setdefault(n, [])
                recs.append((state.ts, want))
                waited = state.ts - recs[0][0]
                if waited < self.scale_down_interval_s:
                    delayed.append(f"{n} -> p{want} ({waited:.0f} of {self.scale_down_interval_s:.0f} s)")
                    continue
                want = max(p for t, p in recs if t >= state.ts - self.scale_down_interval_s)
            new_p[k] = want
            changed.append(k)
            reasons.append(f"{n}: true rate {tpr[k]:,.0f} vs target capacity {cap:,.0f} -> p{want}")
        inputs = {"planned_rate": source_target, "true_rates": dict(zip(names, tpr.tolist())), "backlog": bool(backlog)}
        wait_note = f"; scale-down delayed: {', '.join(delayed)}" if delayed else ""
        if not changed:
            return Decision.keep(self.name, f"every vertex runs at its target parallelism{wait_note}", **inputs)
        outside = [
            names[k]
            for k in changed
            if not (
                self._capacity(targets[k], catch_up[k], hi_u, False)
                <= tpr[k]
                <= self._capacity(targets[k], catch_up[k], lo_u, True)
            )
        ]
        if not outside:
            return Decision.keep(
                self.name,
                f"every changed vertex's true rate is within the utilisation bounds at {source_target:,.0f} rec/s ({'; '.join(reasons)}){wait_note}",
                **inputs,
            )
        job_p = snap_parallelism(self.space, float(new_p.max()), cur.task_slots)
        new_p = np.minimum(new_p, job_p)
        overrides = {n: int(p) for n, p in zip(names, new_p) if p < job_p} if self.per_vertex else {}
        target = cur.with_(parallelism=job_p, vertex_parallelism=overrides)
        if target == cur:
            return Decision.keep(self.name, f"recommended parallelism equals the running one ({'; '.join(reasons)})", **inputs)
        self._pending_down = {}  # cleared after a rescale (DelayedScaleDown.clearAll)
        for k in changed:
            self._history[names[k]] = (state.ts, int(cur_p[k]), int(new_p[k]))
        return Decision(
            Action.RECONFIGURE,
            f"autoscaler: {'; '.join(reasons)} (outside the utilisation bounds: {', '.join(outside)}); "
            f"job parallelism {cur.parallelism} -> {job_p}",
            self.name,
            target=target,
            inputs=inputs,
        )
