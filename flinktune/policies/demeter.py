"""The Demeter policy as published (Geldenhuys et al., ICPE 2024), on our stages.

Facts carried over (see ../shared/docs/ANCHORS.md section 1): the planned rate is the highest
60 s bin mean of a 10-minute forecast times 1.10; when the current latency is bad the job goes
to the default (maximum) configuration; otherwise every candidate is scored with the surrogate
at the planned rate, the cheapest one that meets the latency and recovery constraints is chosen,
and the current configuration is kept when it meets them and the best one is less than 5 %
cheaper. When the planned rate lies outside what profiling has covered (the published method
buckets rates in 10k rec/s chunks and needs observations in the target chunk), it profiles.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from flinktune.config_space import ConfigSpace
from flinktune.decision import Action, Decision, JobState
from flinktune.decision.stages import PolicyContext
from flinktune.tuner.profiling import propose_profiling
from flinktune.tuner.selection import score_candidates

__all__ = ["DemeterPolicy"]


@dataclass
class DemeterPolicy:
    space: ConfigSpace
    confidence: float = 0.95
    buffer: float = 1.10
    min_improvement: float = 0.05
    chunk: float = 10_000.0
    profile_batch: int = 3
    name: str = "demeter"

    def decide(self, state: JobState, context: PolicyContext) -> Decision:
        mx = self.space.maximum
        if context.forecast is None or context.surrogate is None:
            missing = "forecaster" if context.forecast is None else "surrogate"
            return Decision.keep(self.name, f"hold: no champion {missing} model is available yet")
        planned = float(np.max(context.forecast.mean)) * self.buffer
        inputs = {"planned_rate": planned, "rule": "max bin mean x 1.10"}
        if state.latency_p95_ms > context.latency_target_ms and state.config != mx:
            return Decision(
                Action.RECONFIGURE,
                f"latency p95 {state.latency_p95_ms:.0f} ms is over the target {context.latency_target_ms:.0f} ms: "
                f"go to the default maximum {mx.describe()} (Demeter's fallback)",
                self.name,
                target=mx,
                inputs=inputs,
            )
        covered = float(context.extras.get("profiled_max_rate", 0.0))
        if planned > covered + self.chunk:
            configs = propose_profiling(context.surrogate, self.space, planned, context, self.profile_batch, state.config)
            return Decision(
                Action.PROFILE,
                f"planned rate {planned:,.0f} rec/s is beyond the profiled range (up to {covered:,.0f} rec/s): "
                f"profile {len(configs)} configurations at that rate before choosing",
                self.name,
                profile_configs=tuple(configs),
                inputs=inputs,
            )
        scores = score_candidates(context.surrogate, self.space, planned, context.latency_target_ms, context.recovery_limit_s)
        best = scores.cheapest_feasible(self.confidence)
        cur = scores.index_of(state.config)
        if best is None:
            if state.config == mx:
                return Decision.keep(
                    self.name,
                    f"no configuration meets the goals at {planned:,.0f} rec/s with P>={self.confidence}: stay at the maximum",
                    **inputs,
                )
            return Decision(
                Action.RECONFIGURE,
                f"no configuration meets the goals at {planned:,.0f} rec/s with P>={self.confidence}: go to the maximum",
                self.name,
                target=mx,
                inputs=inputs,
            )
        inputs.update(
            best=scores.candidates[best].to_dict(), best_p=float(scores.p_feasible[best]), best_cost=float(scores.cost[best])
        )
        if cur is not None and scores.p_feasible[cur] >= self.confidence:
            saving = 1.0 - scores.cost[best] / scores.cost[cur]
            if saving <= self.min_improvement:
                return Decision.keep(
                    self.name,
                    f"current configuration meets the goals at {planned:,.0f} rec/s ({scores.summary(cur)}); the best alternative saves only {saving:.0%}",
                    **inputs,
                )
        target = scores.candidates[best]
        return Decision(
            Action.RECONFIGURE,
            f"planned rate {planned:,.0f} rec/s (forecast peak x {self.buffer:.2f}): cheapest configuration meeting "
            f"latency <= {context.latency_target_ms:.0f} ms and recovery <= {context.recovery_limit_s:.0f} s is "
            f"{target.describe()} ({scores.summary(best)})",
            self.name,
            target=target,
            inputs=inputs,
        )
