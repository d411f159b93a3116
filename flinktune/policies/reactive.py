"""Reactive: a CPU-threshold Horizontal Pod Autoscaler driving Flink's reactive mode.

Use :class:`ReactivePolicy` (``make_policy("reactive", space)``) as the "reactive + HPA" baseline: the
HPA rule (``desired = ceil(replicas x utilisation / target)``, a 0.1 tolerance, scale-ups at once,
scale-downs to the highest recommendation of the last 300 s) sets the TaskManager count, and nothing
else changes. The replay runs its twin in reactive mode (``flinktune.replay.harness.REACTIVE_MODE``),
so every rescale is a restart from the last checkpoint. ``target_utilization`` is 0.7; the measured
runs of ``../shared/data/demeter-ads`` used 0.35, which only means something on a twin whose CPU is
calibrated (:mod:`flinktune.calibration.cpu`). The published pair and why it behaves as it does
in the replay are in ``docs/baselines.md`` (reactive).
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass, field

import numpy as np

from flinktune.config_space import ConfigSpace
from flinktune.decision import Action, Decision, JobState
from flinktune.decision.stages import PolicyContext
from flinktune.policies.grid import snap_parallelism

__all__ = ["ReactivePolicy"]


@dataclass
class ReactivePolicy:
    """HPA on CPU utilisation of the reserved TaskManager cores (``target_utilization``)."""

    space: ConfigSpace
    target_utilization: float = 0.7
    tolerance: float = 0.1
    scale_down_stabilization_s: float = 300.0
    name: str = "reactive"
    _recs: deque = field(default_factory=deque, repr=False)

    def decide(self, state: JobState, context: PolicyContext) -> Decision:
        cur = state.config
        if not np.isfinite(state.cpu_used):
            return Decision.keep(self.name, "hold: no CPU metrics")
        util = state.cpu_used / cur.total_cpu
        ratio = util / self.target_utilization
        replicas = cur.taskmanagers
        desired = replicas if abs(ratio - 1.0) <= self.tolerance else max(1, math.ceil(replicas * ratio - 1e-9))
        self._recs.append((state.ts, desired))
        while self._recs and state.ts - self._recs[0][0] > self.scale_down_stabilization_s:
            self._recs.popleft()
        if desired < replicas:  # scale-down stabilization: the highest recent recommendation wins
            desired = min(replicas, max(d for _, d in self._recs))
        p = snap_parallelism(self.space, desired * cur.task_slots, cur.task_slots)
        inputs = {"cpu_utilization": util, "desired_replicas": desired}
        if p == cur.parallelism:
            return Decision.keep(
                self.name,
                f"CPU utilisation {util:.0%} vs target {self.target_utilization:.0%}: {replicas} TaskManagers stay",
                **inputs,
            )
        return Decision(
            Action.RECONFIGURE,
            f"HPA: CPU utilisation {util:.0%} vs target {self.target_utilization:.0%} -> {desired} TaskManagers; "
            f"reactive mode runs parallelism {p}",
            self.name,
            target=cur.with_(parallelism=p, vertex_parallelism={}),
            inputs=inputs,
        )
