"""Reactive: a CPU-threshold Horizontal Pod Autoscaler driving Flink's reactive mode.

Facts carried over: in Flink's reactive mode the job always runs at the parallelism the
TaskManagers offer (TaskManagers x slots), so scaling the TaskManager Deployment rescales the job
(restarting it from its latest checkpoint). The Kubernetes HPA computes
``desired = ceil(replicas x utilisation / target)``, does nothing while the ratio is within its
0.1 tolerance, scales up at once and scales down only to the highest recommendation of the last
300 s (its default scale-down stabilization window). Demeter's paper used this pair as a baseline
("reactive + HPA": CPU 0.61-0.82 of static with 8-9 recovery-limit violations per run).
Only the TaskManager count changes; CPU, memory, slots and checkpoint interval stay as deployed.

What the policy cannot do itself, the replay does (``flinktune.replay.harness.REACTIVE_MODE``): its
twin runs in reactive mode, so every rescale is a restart from the last checkpoint, and a lost
TaskManager restarts the job once without it and again when it registers back.

Target: the measured baseline of Demeter's evaluation (ANCHORS.md 1.8 setup; ``reactive35`` in
../shared/data/demeter-ads, "Flink reactive mode + HPA at 35 % CPU") ran at a 35 % CPU target,
and its per-minute CPU load sat there (0.34 mean over three 18 h runs). The fidelity benchmark
(``benchmarks/twin_fidelity.py``) replays it at that published target, on a twin whose CPU per
record is calibrated on the measured static CPU load (:mod:`flinktune.twin.cpu_calibration`); a
35 % target is only meaningful on such a twin. ``target_utilization`` defaults to the HPA-style
0.7 for twins whose CPU is not calibrated (the ysb and tsw profiles, whose CPU is the busy work).
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
