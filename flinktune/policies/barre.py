"""BARRE-style burst reserve (Drougas and Kalogeraki, IPDPS 2009): reserve ahead for the forecast's bursts.

Use :class:`BarrePolicy` (``make_policy("barre", space)``) as a baseline that takes the cheapest
candidate, at the current memory and checkpoint interval, whose capacity (the measured true
processing rate scaled by the cores its slots get) times ``max_utilization`` covers the forecast's
highest-quantile peak. The published method and why it behaves as it does in the replay are in
``docs/baselines.md`` (barre).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from flinktune.config_space import ConfigSpace, Configuration
from flinktune.decision import Action, Decision, JobState
from flinktune.decision.stages import PolicyContext

__all__ = ["BarrePolicy", "measured_capacity"]


def measured_capacity(state: JobState) -> float:
    """Job input rec/s the running configuration sustains: the slowest vertex's true rate, in source units."""
    src = state.vertices[0].records_in_per_s if state.vertices else 0.0
    caps = [
        v.true_processing_rate * src / v.records_in_per_s
        for v in state.vertices
        if v.records_in_per_s > 0 and np.isfinite(v.true_processing_rate)
    ]
    return float(min(caps)) if caps else float("nan")


def _slot_cores(cfg: Configuration) -> float:
    return cfg.parallelism * min(cfg.cpu / cfg.task_slots, 1.0)  # a subtask thread uses at most one core


@dataclass
class BarrePolicy:
    space: ConfigSpace
    max_utilization: float = 0.9
    name: str = "barre"

    def decide(self, state: JobState, context: PolicyContext) -> Decision:
        fc = context.forecast
        if fc is None:
            return Decision.keep(self.name, "hold: no forecast to plan the burst reserve from")
        cap_now = measured_capacity(state)
        if not np.isfinite(cap_now) or cap_now <= 0:
            return Decision.keep(self.name, "hold: no measured true processing rate")
        top = max(fc.quantiles) if fc.quantiles else None
        median = fc.peak(0.5) if 0.5 in fc.quantiles else fc.peak()
        burst = fc.peak(top) if top is not None else fc.peak()
        reserve_rate = max(burst, state.input_rate)
        per_core = cap_now / _slot_cores(state.config)
        cur = state.config
        fits = [
            c
            for c in self.space.candidates()
            if c.memory_mb == cur.memory_mb
            and c.checkpoint_interval_s == cur.checkpoint_interval_s
            and per_core * _slot_cores(c) * self.max_utilization >= reserve_rate
        ]
        inputs = {"planned_rate": reserve_rate, "burst_reserve": burst - median, "measured_capacity": cap_now}
        if not fits:
            target = self.space.maximum.with_(memory_mb=cur.memory_mb, checkpoint_interval_s=cur.checkpoint_interval_s)
            target = target if self.space.contains(target) else self.space.maximum
            why = f"no reservation covers the burst of {reserve_rate:,.0f} rec/s: take the largest"
        else:
            target = fits[0]  # candidates come cheapest first
            why = (
                f"reserve for a burst of {reserve_rate:,.0f} rec/s (forecast p50 peak {median:,.0f} + reserve "
                f"{burst - median:,.0f}); {target.describe()} sustains ~{per_core * _slot_cores(target):,.0f} rec/s"
            )
        if target == cur.with_(vertex_parallelism={}) and not cur.vertex_parallelism:
            return Decision.keep(self.name, f"{why}: already reserved", **inputs)
        return Decision(Action.RECONFIGURE, why, self.name, target=target, inputs=inputs)
