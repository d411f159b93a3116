"""Sage-style rules (LinkedIn's auto-sizing for Samza, HotCloud 2020): ordered, interpretable rules.

Use :class:`SagePolicy` (``make_policy("sage", space)``) as the rule-based baseline: memory, then CPU,
then parallelism, scale-ups before scale-downs, one grid step of one resource per decision, and no
second scale-down of a resource before its previous one has settled. Thresholds: heap used over 80 %
of reserved (up) or under 30 % (down), CPU over 80 % or under 30 %, and for parallelism a growing lag
or busy time over 80 % (up) or busy time under 30 % with no lag (down). The published rules and why it
behaves as it does in the replay are in ``docs/baselines.md`` (sage).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from flinktune.config_space import ConfigSpace, Configuration
from flinktune.decision import Action, Decision, JobState
from flinktune.decision.stages import PolicyContext
from flinktune.policies.grid import grid_step

__all__ = ["SagePolicy"]


@dataclass
class SagePolicy:
    space: ConfigSpace
    high: float = 0.8
    low: float = 0.3
    lag_growth_tolerance: float = 50.0
    settle_s: float = 1800.0
    name: str = "sage"
    _last_down: dict = field(default_factory=dict, repr=False)

    def _step(self, cfg: Configuration, knob: str, steps: int) -> Configuration:
        values = getattr(self.space, knob)
        new = grid_step(values, getattr(cfg, knob), steps)
        if knob == "parallelism":
            while new % cfg.task_slots and new != grid_step(values, new, steps):
                new = grid_step(values, new, steps)
            return cfg.with_(parallelism=int(new), vertex_parallelism={})
        return cfg.with_(**{knob: type(getattr(cfg, knob))(new)})

    def decide(self, state: JobState, context: PolicyContext) -> Decision:
        cfg = state.config
        mem = state.memory_used_mb / cfg.total_memory_mb
        cpu = state.cpu_used / cfg.total_cpu
        busy = state.busy_ratio if np.isfinite(state.busy_ratio) else 0.0
        lagging = state.lag_growth > self.lag_growth_tolerance
        inputs = {"memory_utilization": mem, "cpu_utilization": cpu, "busy_ratio": busy, "lag_growth": state.lag_growth}
        ups = [
            ("memory_mb", mem > self.high, f"heap used {mem:.0%} of reserved > {self.high:.0%}"),
            ("cpu", cpu > self.high, f"CPU used {cpu:.0%} of reserved > {self.high:.0%}"),
            (
                "parallelism",
                lagging or busy > self.high,
                f"lag growing {state.lag_growth:,.0f} rec/s or busy {busy:.0%} > {self.high:.0%}",
            ),
        ]
        downs = [
            ("memory_mb", mem < self.low, f"heap used {mem:.0%} of reserved < {self.low:.0%}"),
            ("cpu", cpu < self.low, f"CPU used {cpu:.0%} of reserved < {self.low:.0%}"),
            (
                "parallelism",
                busy < self.low and not lagging and state.lag <= state.input_rate,
                f"busy {busy:.0%} < {self.low:.0%} and no lag",
            ),
        ]
        for knob, fire, why in ups:
            if fire:
                target = self._step(cfg, knob, +1)
                if target != cfg:
                    return Decision(
                        Action.RECONFIGURE,
                        f"rule {knob} up: {why}; {cfg.describe()} -> {target.describe()}",
                        self.name,
                        target=target,
                        inputs=inputs,
                    )
        for knob, fire, why in downs:
            if not fire:
                continue
            since = state.ts - self._last_down.get(knob, -np.inf)
            if since < self.settle_s:
                continue  # its previous scale-down has not settled yet; try the next resource
            target = self._step(cfg, knob, -1)
            if target != cfg:
                self._last_down[knob] = state.ts
                return Decision(
                    Action.RECONFIGURE,
                    f"rule {knob} down: {why}; {cfg.describe()} -> {target.describe()}",
                    self.name,
                    target=target,
                    inputs=inputs,
                )
        return Decision.keep(self.name, f"no rule fires (heap {mem:.0%}, CPU {cpu:.0%}, busy {busy:.0%})", **inputs)
