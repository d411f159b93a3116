"""The Demeter policy as published (Geldenhuys et al., ICPE 2024), on our stages.

Use :class:`DemeterPolicy` (``make_policy("demeter", space)``) as the Demeter baseline: a 10-minute
optimisation clock reset by failures, a planned rate from a 10-minute forecast, per-rate-chunk models
that decide once a chunk is profiled, Demeter's constraint check, ranking and keep rule, and its
profiling rounds. Each published choice is an option whose default is the published one. Its parts
live by concept: the chunks in :mod:`flinktune.policies.demeter_chunks`, what the target chunk's
models know in :mod:`flinktune.policies.demeter_models`, the constraint models in
:mod:`flinktune.policies.demeter_constraints`, the ranking in :mod:`flinktune.policies.demeter_ranking`
and the profiling thread in :mod:`flinktune.policies.demeter_profiling`. What the published system
does, step by step, and why it behaves as it does in the replay are in ``docs/baselines.md`` (demeter).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from flinktune.config_space import Configuration
from flinktune.decision import Action, Decision, JobState
from flinktune.decision.stages import PolicyContext
from flinktune.policies.demeter_chunks import target_chunk
from flinktune.policies.demeter_models import DemeterChunkModels
from flinktune.policies.demeter_profiling import (
    model_suggestions,
    pack_budget,
    profiling_budget,
    profiling_candidates,
    sobol_suggestions,
)
from flinktune.policies.demeter_ranking import demeter_objective, screen_candidates
from flinktune.tuner.profiling import propose_profiling
from flinktune.tuner.selection import score_candidates

__all__ = ["DemeterPolicy"]


@dataclass
class DemeterPolicy(DemeterChunkModels):
    """Stateful: keeps Demeter's 10-minute optimisation clock (reset by failures) and its profiling
    thread's. The options that shape the target chunk's models (``chunk``, ``num_init``,
    ``sobol_gate``, ``constraint_models``, ``support_models``, ``chunk_training``, ``chunk_rate``)
    are :class:`~flinktune.policies.demeter_models.DemeterChunkModels`'."""

    confidence: float = 0.95
    buffer: float = 1.10
    min_improvement: float = 0.05
    profile_batch: int = 3
    eval_interval_s: float = 600.0
    screen_factor: float = 1.25
    screen_quantile: float = 0.25
    #: Profile at the production job's current rate (the published profiling jobs read its input
    #: topic) rather than at the planned rate.
    profile_at_current_rate: bool = True
    #: The profiling thread's round (docs/baselines.md, demeter): 600 s of suggestion search
    #: (``profiling_timeout``), then at least 300 s of profiling runs (120 s start, 60 s measure, the
    #: failure and its recovery); it also waits 600 s before its first round.
    profile_every_s: float = 900.0
    #: The cluster share of the production and profiling jobs (``cpuConst``, ``memConst``) and the
    #: shrink of the profiling budget per completed trial (``optimization_base_factor``).
    cluster_cpu: float = 50.0
    cluster_memory_mb: float = 430_000.0
    budget_factor: float = 0.95
    #: When a current configuration that meets the goals is kept (docs/baselines.md, demeter: rescale decision step 4):
    #: ``"published"``, the published code's condition, keeps it only when the best candidate is
    #: cheaper by at most ``min_improvement`` and otherwise moves to the best, a costlier one
    #: included; ``"symmetric"`` keeps it whenever the best is within ``min_improvement`` either
    #: way.
    keep_rule: str = "published"
    #: Which configurations are ranked against the current one (docs/baselines.md, demeter: rescale decision step 3):
    #: ``"others"``, as published, ranks every configuration but the current one, and a current
    #: one that meets the goals, or is the default, is then kept or left by the keep rule (so the
    #: published rule leaves a current one that is itself the cheapest for the best other);
    #: ``"all"`` ranks the current one too and keeps it when it ranks best.
    candidate_set: str = "others"
    #: How a profiling round's suggestions are drawn (docs/baselines.md, demeter: profiling decision):
    #: ``"published"``, quasi-random while the target chunk holds fewer than ``num_init`` profiles,
    #: then qNEHVI on the target chunk's model (:mod:`flinktune.policies.demeter_profiling`);
    #: ``"surrogate"``, qLogNEHVI on the replay's surrogate at the planned rate, up to
    #: ``profile_batch``.
    suggestions: str = "published"
    #: The most suggestions the chunk's model is asked for in one round (the published search is
    #: bounded by its 600 s instead; up to 6 parallel profiles were seen in its real runs).
    max_suggestions: int = 6
    name: str = "demeter"
    _clock: float | None = field(default=None, repr=False)
    _profiled: float | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        super().__post_init__()
        self._check_choices(
            keep_rule=("published", "symmetric"),
            candidate_set=("others", "all"),
            suggestions=("published", "surrogate"),
        )

    def _due(self, state: JobState) -> float | None:
        """Seconds still to wait on the optimisation clock (None: optimise now)."""
        if self._clock is None:  # the clock starts with the job (its first window)
            self._clock = state.ts - state.window_s
        if state.restarts > 0:  # a failure injection resets the clock (docs/baselines.md, demeter)
            self._clock = state.ts
        wait = self.eval_interval_s - (state.ts - self._clock)
        if wait > 1e-9:
            return wait
        self._clock = state.ts
        return None

    def profiling_candidates(
        self, state: JobState, context: PolicyContext, rate: float, *, ref_scale: bool = True
    ) -> list[Configuration]:
        """The candidates Demeter accepts as profiling suggestions at ``rate`` (docs/baselines.md, demeter;
        :func:`~flinktune.policies.demeter_profiling.profiling_candidates`)."""
        return profiling_candidates(
            self.space,
            state,
            self._observations(context),
            rate,
            context.latency_target_ms,
            self.chunk,
            self._current_rate(state),
            ref_scale=ref_scale,
        )

    def profiling_budget(self, state: JobState, n_trials: int) -> tuple[float, float]:
        """(CPU, memory MB) the next profiling round may reserve in all (docs/baselines.md, demeter:
        profiling decision): the cluster share less the production job's, shrunk by 0.95 per completed trial."""
        return profiling_budget(state.config, n_trials, self.cluster_cpu, self.cluster_memory_mb, self.budget_factor)

    def _suggest(self, state: JobState, context: PolicyContext, planned: float) -> tuple[list[Configuration], str]:
        """The profiling round's suggestions within its budget, and how they were drawn
        (docs/baselines.md, demeter; :mod:`flinktune.policies.demeter_profiling`)."""
        obs = self._observations(context)
        # The published optimiser's completed trials are the profiles it was trained on.
        rows = self._target_rows(obs, state, context, planned) if obs is not None and len(obs) else None
        n_trials = 0 if rows is None else len(rows)
        cpu_cap, mem_cap = self.profiling_budget(state, n_trials)
        budget = f"budget {cpu_cap:.1f} CPU, {mem_cap:,.0f} MB"
        if self.suggestions == "surrogate":
            allowed = [
                c
                for c in self.profiling_candidates(state, context, planned)
                if c.total_cpu <= cpu_cap + 1e-9 and c.total_memory_mb <= mem_cap + 1e-9
            ]
            proposed = (
                propose_profiling(context.surrogate, self.space, planned, context, self.profile_batch, state.config, allowed)
                if allowed and context.surrogate is not None
                else []
            )
            return pack_budget(proposed, cpu_cap, mem_cap), f"qLogNEHVI on the replay's surrogate, {budget}"
        needed = self._needed(obs, state, context, planned)
        if obs is not None and rows is not None and n_trials >= needed:
            cands = self.profiling_candidates(state, context, planned)
            lo, hi, chunk = self._chunk(obs, state, context, planned)
            try:
                fit = self.constraint_fit(obs, lo, hi, chunk, context.latency_target_ms)
            except ValueError as exc:  # a chunk its GPs cannot fit yet: draw as the quasi-random phase does
                how = f"quasi-random, the chunk's model could not be fitted ({exc}), {budget}"
                return sobol_suggestions(cands, (lo, hi), cpu_cap, mem_cap), how
            configs = model_suggestions(
                fit,
                self.space,
                cands,
                rows,
                cpu_cap,
                mem_cap,
                context.recovery_limit_s,
                max_suggestions=self.max_suggestions,
                seed=int(round(lo + hi)),
            )
            return configs, f"qNEHVI on the target chunk's model of {n_trials} profiles, {budget}"
        rates = obs["input_rate"].to_numpy(dtype=float) if rows is not None and obs is not None else np.zeros(0)
        lo, hi = target_chunk(rates, planned, self.chunk, self._current_rate(state))
        cands = self.profiling_candidates(state, context, planned, ref_scale=False)
        how = f"quasi-random: the target chunk holds {n_trials} profiles ({needed} needed), {budget}"
        return sobol_suggestions(cands, (lo, hi), cpu_cap, mem_cap), how

    def _keep_and_profile(self, state: JobState, context: PolicyContext, planned: float, inputs: dict, why: str) -> Decision:
        """Keep the configuration; profile when the profiling thread's round is due (docs/baselines.md, demeter:
        it runs on its own loop beside the optimiser; a step here does one action, so its rounds
        fall on the optimiser's keeps). The round's suggestions are trimmed to the budget."""
        ts = float(state.ts)
        if self._profiled is None:  # its first round comes with the first optimisation (both wait 600 s)
            self._profiled = ts - self.profile_every_s
        due = self.profile_every_s - (ts - self._profiled)
        if due > 1e-9:
            return Decision.keep(self.name, f"{why}; next profiling round in {due:.0f} s", **inputs)
        configs, how = self._suggest(state, context, planned)
        if not configs:
            return Decision.keep(self.name, f"{why}; no profiling suggestion fits the budget ({how})", **inputs)
        self._profiled = ts
        # The profiling jobs read the production job's input topic: they see the current rate.
        at = self._current_rate(state) if self.profile_at_current_rate else None
        at = planned if at is None else at
        return Decision(
            Action.PROFILE,
            f"{why}: keep, and profile {len(configs)} configurations at {at:,.0f} rec/s ({how})",
            self.name,
            profile_configs=tuple(configs),
            inputs={**inputs, "profile_rate": at, "suggestion_step": how},
        )

    def decide(self, state: JobState, context: PolicyContext) -> Decision:
        mx = self.space.maximum
        wait = self._due(state)
        if wait is not None:
            why = " (reset by a failure)" if state.restarts > 0 else ""
            return Decision.keep(self.name, f"next optimisation in {wait:.0f} s on the 10-minute clock{why}")
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
        surrogate, why_profile, score_rate, chunk = self._chunk_model(state, context, planned)
        if why_profile is not None:
            return self._keep_and_profile(state, context, planned, inputs, why_profile)
        assert surrogate is not None  # context.surrogate was checked above; a chunk model is never None
        scores = score_candidates(surrogate, self.space, score_rate, context.latency_target_ms, context.recovery_limit_s)
        usage = np.array([demeter_objective(c, self.space) for c in scores.candidates])
        totals = np.array([(c.total_cpu, c.total_memory_mb) for c in scores.candidates], dtype=float)
        feasible, how = self._feasible(scores, context, chunk)
        inputs.update(how)
        cur = scores.index_of(state.config)
        others = self.candidate_set == "others"
        rankable = feasible.copy()
        if others and cur is not None:
            rankable[cur] = False
        ranked = screen_candidates(totals, rankable, self.screen_factor, self.screen_quantile)
        # The published optimiser counts the default as able to handle any rate (1.5 step 4).
        cur_ok = cur is not None and bool(feasible[cur] or (others and state.config == mx))
        if ranked.size == 0:
            if others and cur is not None and cur_ok and state.config != mx:
                why = (
                    f"no other configuration meets the goals at {planned:,.0f} rec/s (mean + std x 1.25) and the "
                    f"current one does ({scores.summary(cur)})"
                )
                return self._keep_and_profile(state, context, planned, inputs, why)
            if state.config == mx:
                why = f"no configuration meets the goals at {planned:,.0f} rec/s (mean + std x 1.25): stay at the maximum"
                return self._keep_and_profile(state, context, planned, inputs, why)
            return Decision(
                Action.RECONFIGURE,
                f"no configuration meets the goals at {planned:,.0f} rec/s (mean + std x 1.25): go to the maximum",
                self.name,
                target=mx,
                inputs=inputs,
            )
        # Ties in usage: prefer the higher probability, then the shorter checkpoint interval.
        best = int(
            min(
                ranked,
                key=lambda i: (
                    round(float(usage[i]), 9),
                    -float(scores.p_feasible[i]),
                    scores.candidates[i].checkpoint_interval_s,
                ),
            )
        )
        inputs.update(
            best=scores.candidates[best].to_dict(),
            best_p=float(scores.p_feasible[best]),
            best_usage=float(usage[best]),
            screened_out=int(feasible.sum() - ranked.size),
        )
        cur_usage = demeter_objective(state.config.with_(vertex_parallelism={}), self.space)
        costlier = ""
        if cur is not None and cur_ok:
            diff = abs(float(usage[best]) - cur_usage) / cur_usage
            cheaper = float(usage[best]) < cur_usage
            if best == cur or (diff <= self.min_improvement and (cheaper or self.keep_rule == "symmetric")):
                holds = "meets the goals" if feasible[cur] else "is the default, taken to cope"
                why = (
                    f"current configuration {holds} at {planned:,.0f} rec/s ({scores.summary(cur)}); the best "
                    f"candidate's usage differs by only {diff:.0%}"
                )
                return self._keep_and_profile(state, context, planned, inputs, why)
            if not cheaper:
                costlier = f" (costlier than the current one by {diff:.0%}: the published rule moves to the best ranked)"
        target = scores.candidates[best]
        return Decision(
            Action.RECONFIGURE,
            f"planned rate {planned:,.0f} rec/s (forecast peak x {self.buffer:.2f}): of the configurations meeting "
            f"latency <= {context.latency_target_ms:.0f} ms and recovery <= {context.recovery_limit_s:.0f} s, less the "
            f"cheapest ones under the 1.25x / 25th-percentile screen, the lowest usage is {target.describe()} "
            f"({scores.summary(best)}){costlier}",
            self.name,
            target=target,
            inputs=inputs,
        )
