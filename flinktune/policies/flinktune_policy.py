"""The flinktune policy (ours): Demeter's model-based choice, made safer and steadier.

Differences from the published Demeter policy, each for a reason seen in its behaviour:
- plan for an upper quantile of the forecast peak (p90 by default) instead of mean x 1.10, and
  never below the current input rate plus the rate needed to drain the lag within ``catch_up_s``
  (acting ahead of the load without ignoring a backlog that is already there);
- when goals are missed, scale up to the cheapest configuration the models trust at that rate
  instead of jumping to the maximum (Demeter's fallback doubles the cost of every hiccup);
- hysteresis: keep the current configuration while it meets the goals and the saving is under
  ``min_saving`` (10 %), which keeps reconfigurations (and their downtime) rare;
- prefer a change that only touches parallelism (in-place rescale, seconds of pause instead of a
  savepoint redeploy) when it costs at most ``inplace_slack`` more than the best change.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from flinktune.config_space import Configuration, ConfigSpace
from flinktune.decision import Action, Decision, JobState
from flinktune.policies.profiling import propose_profiling
from flinktune.policies.selection import score_candidates
from flinktune.stages import PolicyContext

__all__ = ["FlinktunePolicy"]


def _in_place(current: Configuration, target: Configuration) -> bool:
    return (current.task_slots, current.cpu, current.memory_mb, current.checkpoint_interval_s) == (
        target.task_slots, target.cpu, target.memory_mb, target.checkpoint_interval_s)


@dataclass
class FlinktunePolicy:
    space: ConfigSpace
    confidence: float = 0.95
    quantile: float = 0.9
    catch_up_s: float = 300.0
    min_saving: float = 0.10
    inplace_slack: float = 0.05
    profile_margin: float = 1.15
    profile_batch: int = 3
    name: str = "flinktune"

    def planned_rate(self, state: JobState, context: PolicyContext) -> tuple[float, str]:
        fc = context.forecast
        assert fc is not None
        q = self.quantile if self.quantile in fc.quantiles else max(fc.quantiles, default=None)
        peak = fc.peak(q) if q is not None else fc.peak()
        backlog = max(state.lag, 0.0) / self.catch_up_s if np.isfinite(state.lag) else 0.0
        now_rate = (state.input_rate if np.isfinite(state.input_rate) else 0.0) + backlog
        if now_rate > peak:
            return now_rate, f"current input {state.input_rate:,.0f} rec/s + lag drain {backlog:,.0f} rec/s"
        return peak, f"forecast p{int(round((q or 0.5) * 100))} peak of the next {fc.horizon_s // 60} min"

    def decide(self, state: JobState, context: PolicyContext) -> Decision:
        if context.forecast is None or context.surrogate is None:
            missing = "forecaster" if context.forecast is None else "surrogate"
            return Decision.keep(self.name, f"hold: no champion {missing} model is available yet")
        planned, why = self.planned_rate(state, context)
        inputs = {"planned_rate": planned, "rule": why}
        covered = float(context.extras.get("profiled_max_rate", 0.0))
        if planned > covered * self.profile_margin:
            configs = propose_profiling(context.surrogate, self.space, planned, context, self.profile_batch, state.config)
            return Decision(
                Action.PROFILE,
                f"planned rate {planned:,.0f} rec/s ({why}) is beyond what profiling covered (up to {covered:,.0f} rec/s): "
                f"profile {len(configs)} configurations at that rate first",
                self.name, profile_configs=tuple(configs), inputs=inputs,
            )
        scores = score_candidates(context.surrogate, self.space, planned, context.latency_target_ms, context.recovery_limit_s)
        best = scores.cheapest_feasible(self.confidence)
        cur = scores.index_of(state.config)
        missing_goals = state.latency_p95_ms > context.latency_target_ms
        mx = self.space.maximum
        if best is None:
            if state.config == mx:
                return Decision.keep(self.name, f"no configuration is predicted to meet the goals at {planned:,.0f} rec/s with P>={self.confidence}; already at the maximum", **inputs)
            return Decision(Action.RECONFIGURE, f"no configuration is predicted to meet the goals at {planned:,.0f} rec/s ({why}) with P>={self.confidence}: go to the maximum {mx.describe()}", self.name, target=mx, inputs=inputs)
        # Prefer an in-place rescale when it is nearly as cheap as the best change.
        if cur is not None and not _in_place(state.config, scores.candidates[best]):
            ok = [i for i in np.flatnonzero(scores.p_feasible >= self.confidence) if _in_place(state.config, scores.candidates[i])]
            if ok:
                alt = min(ok, key=lambda i: scores.cost[i])
                if scores.cost[alt] <= scores.cost[best] * (1 + self.inplace_slack):
                    best = int(alt)
        target = scores.candidates[best]
        inputs.update(best=target.to_dict(), best_p=float(scores.p_feasible[best]), best_cost=float(scores.cost[best]))
        if cur is not None and scores.p_feasible[cur] >= self.confidence and not missing_goals:
            saving = 1.0 - scores.cost[best] / scores.cost[cur]
            if saving < self.min_saving:
                return Decision.keep(
                    self.name,
                    f"current configuration meets the goals at {planned:,.0f} rec/s ({why}; {scores.summary(cur)}); "
                    f"the cheapest safe alternative saves only {max(saving, 0):.0%} (< {self.min_saving:.0%})",
                    **inputs,
                )
            verb = f"save {saving:.0%} of reserved CPU and memory"
        elif missing_goals:
            verb = f"fix missed goals (p95 {state.latency_p95_ms:,.0f} ms over target {context.latency_target_ms:,.0f} ms)"
        else:
            p_cur = f"P(goals)={scores.p_feasible[cur]:.2f}" if cur is not None else "outside the models' space"
            verb = f"the current configuration is not safe at that rate ({p_cur})"
        mode = "in-place rescale" if _in_place(state.config, target) else "savepoint redeploy"
        return Decision(
            Action.RECONFIGURE,
            f"{verb}: planned rate {planned:,.0f} rec/s ({why}); {target.describe()} is the cheapest configuration "
            f"with P(p95 <= {context.latency_target_ms:,.0f} ms and recovery <= {context.recovery_limit_s:.0f} s) >= "
            f"{self.confidence} ({scores.summary(best)}); applied by {mode}",
            self.name, target=target, inputs=dict(inputs, mode=mode),
        )
