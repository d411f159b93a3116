"""What Demeter's models know at the target rate chunk: which profiles train them, when they start to
predict, and which candidates they judge to meet the constraints.

Use :class:`DemeterChunkModels` as the base of :class:`~flinktune.policies.demeter.DemeterPolicy`: it
holds the options that shape the models (chunk width, training set, Sobol gate, constraint models and
their RGPE support) and answers, for a step's state and context, with the surrogate to score with and
the target chunk (lower, upper, profiles), or with why the chunk must be profiled first. The profiles
come from ``context.observations`` and a chunk's surrogate from ``context.fit_surrogate``; without
them ``context.surrogate`` (all profiles, rate as an input) is used and only the profiled range is
checked.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from flinktune.config_space import ConfigSpace
from flinktune.decision import JobState
from flinktune.decision.stages import PolicyContext, Surrogate
from flinktune.policies.demeter_chunks import chunk_profiles, chunk_rows, support_chunks, target_chunk
from flinktune.policies.demeter_constraints import CONSTRAINT_SEM, ConstraintModels, fit_constraint_models
from flinktune.policies.demeter_ranking import meets_constraints
from flinktune.tuner.selection import CandidateScores

__all__ = ["DemeterChunkModels"]

#: A target chunk: (lower bound, upper bound, its profiles at their measured rates).
Chunk = tuple[float, float, pd.DataFrame]


@dataclass
class DemeterChunkModels:
    """The target chunk's models and their options; stateful only through a cache of fitted
    constraint models (16 entries, keyed on the chunks' profiles)."""

    space: ConfigSpace
    #: The width of a rate chunk, rec/s (published: 10k).
    chunk: float = 10_000.0
    #: The scale on a predicted outcome before it is held to its boundary (``const_scaler``).
    const_scaler: float = 1.25
    #: Profiles in the target chunk before its model predicts (Ax's Sobol steps, ``num_init``).
    num_init: int = 3
    #: When the target chunk's model starts predicting (docs/baselines.md, demeter): ``"published"``, after
    #: one profile when a higher chunk supports it (the published target optimiser takes
    #: ``num_init`` 1 when it has RGPE support models, 3 without), else after ``num_init``;
    #: ``"num_init"``, after ``num_init`` always.
    sobol_gate: str = "published"
    #: How the constraints are checked with per-chunk data: ``"published"`` (docs/baselines.md, demeter:
    #: :mod:`flinktune.policies.demeter_constraints`) or ``"surrogate"`` (the chunk surrogate's
    #: latency and recovery).
    constraint_models: str = "published"
    #: RGPE support models from higher chunks (published ``max_num_support_models``; 0: none).
    support_models: int = 2
    #: The constraint observations' noise and fixed SEM (None: no noise added, noise fitted).
    constraint_sem: float | None = CONSTRAINT_SEM
    #: Which of a chunk's profiles train its models and count as the optimiser's completed trials
    #: (docs/baselines.md, demeter): ``"published"`` keeps only the profiles inside the chunk once it holds
    #: ``num_init`` of them with a good and a bad latency (``_filter_by_num_init``), for the target
    #: chunk and the support chunks alike; ``"all"`` keeps every profile assigned to the chunk.
    #: The profiling budget shrinks by ``budget_factor`` per trial counted.
    chunk_training: str = "published"
    #: Which rate places a profile in Demeter's chunks (docs/baselines.md, demeter: the chunks cut the
    #: throughput axis): ``"throughput"``, the throughput the profile reached (a configuration that
    #: fell behind sits at what it could process), as published; ``"input"``, the rate it was
    #: offered.
    chunk_rate: str = "input"
    _cfits: dict = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        self._check_choices(
            chunk_training=("published", "all"),
            chunk_rate=("throughput", "input"),
            sobol_gate=("published", "num_init"),
            constraint_models=("published", "surrogate"),
        )

    def _check_choices(self, **options: tuple[str, str]) -> None:
        """Refuse an option whose value is not one of its two choices, naming both."""
        for name, (first, second) in options.items():
            value = getattr(self, name)
            if value not in (first, second):
                raise ValueError(f"{name} must be {first!r} or {second!r}, got {value!r}")

    @staticmethod
    def _current_rate(state: JobState) -> float | None:
        """The production job's measured input rate, or None when it has none yet."""
        x = state.input_rate
        return float(x) if x is not None and np.isfinite(x) and x > 0 else None

    def _observations(self, context: PolicyContext) -> pd.DataFrame | None:
        """The profiles as the chunks see them: with ``chunk_rate="throughput"`` each at the
        throughput it reached (the published chunks' axis), else at the rate it was offered."""
        obs = context.observations
        if obs is None or self.chunk_rate == "input" or "throughput" not in obs.columns:
            return obs
        return obs.assign(input_rate=obs["throughput"].to_numpy(dtype=float))

    @property
    def _direct_first(self) -> bool:
        return self.chunk_training == "published"

    def _support(self, obs: pd.DataFrame, hi: float, latency_target_ms: float) -> list[Chunk]:
        """The higher chunks whose models support the target chunk ending at ``hi`` (RGPE)."""
        if self.support_models <= 0:
            return []
        return support_chunks(obs, hi, self.chunk, latency_target_ms, self.support_models, direct_first=self._direct_first)

    def _needed(self, obs: pd.DataFrame | None, state: JobState, context: PolicyContext, planned: float) -> int:
        """Profiles the target chunk needs before its model predicts: 1 with support models under the
        published gate, else ``num_init``."""
        if self.sobol_gate != "published" or obs is None or not len(obs):
            return self.num_init
        _, hi = target_chunk(obs["input_rate"].to_numpy(dtype=float), planned, self.chunk, self._current_rate(state))
        return 1 if self._support(obs, hi, context.latency_target_ms) else self.num_init

    def constraint_fit(
        self, obs: pd.DataFrame, lo: float, hi: float, rows: pd.DataFrame, latency_target_ms: float
    ) -> ConstraintModels:
        """The published constraint models of the target chunk ``[lo, hi]`` holding ``rows``
        (docs/baselines.md, demeter; :func:`~flinktune.policies.demeter_constraints.fit_constraint_models`),
        with up to ``support_models`` higher chunks' support; cached on the chunks' profiles."""
        support = self._support(obs, hi, latency_target_ms)
        key = (
            lo,
            hi,
            latency_target_ms,
            *(pd.util.hash_pandas_object(r, index=False).to_numpy().tobytes() for _, _, r in [*support, (lo, hi, rows)]),
            *((a, b) for a, b, _ in support),
        )
        fit = self._cfits.get(key)
        if fit is None:
            fit = fit_constraint_models((lo, hi, rows), support, self.space, latency_target_ms, sem=self.constraint_sem)
            if len(self._cfits) >= 16:
                self._cfits.pop(next(iter(self._cfits)))
            self._cfits[key] = fit
        return fit

    def _feasible(self, scores: CandidateScores, context: PolicyContext, chunk: Chunk | None) -> tuple[np.ndarray, dict]:
        """Which candidates meet the constraints, and what to record of how it was judged."""
        obs = self._observations(context)
        if self.constraint_models == "published" and chunk is not None and obs is not None:
            lo, hi, rows = chunk
            fit = self.constraint_fit(obs, lo, hi, rows, context.latency_target_ms)
            X = np.array([self.space.normalise(c) for c in scores.candidates], dtype=float)
            return fit.feasible(X, context.recovery_limit_s, self.const_scaler), {
                "constraint_support": fit.n_support,
                "constraint_target_weight": {k: v[-1] for k, v in fit.weights.items()},
            }
        return meets_constraints(scores, context.latency_target_ms, context.recovery_limit_s, self.const_scaler), {}

    def _chunk_model(
        self, state: JobState, context: PolicyContext, planned: float
    ) -> tuple[Surrogate | None, str | None, float, Chunk | None]:
        """(surrogate to score with, why to profile instead or None, rate to score at, the target
        chunk's (lower, upper, profiles) when it is modelled from per-chunk data)."""
        obs, fit = self._observations(context), context.fit_surrogate
        if obs is None or fit is None or not len(obs):
            covered = context.profiled_max_rate
            if planned > covered + self.chunk:
                return (
                    context.surrogate,
                    f"planned rate {planned:,.0f} rec/s is beyond the profiled range (up to {covered:,.0f} rec/s)",
                    planned,
                    None,
                )
            return context.surrogate, None, planned, None
        rows = self._target_rows(obs, state, context, planned)
        n_good = int((rows["latency_ms"] <= context.latency_target_ms).sum())
        lo = float(rows["input_rate"].iloc[0]) if len(rows) else planned
        needed = self._needed(obs, state, context, planned)
        if len(rows) < needed:  # the published model is still Sobol: keep, and profile
            return (
                context.surrogate,
                f"the target rate chunk of {planned:,.0f} rec/s holds {len(rows)} profiles, {n_good} with a good "
                f"latency ({needed} needed)",
                planned,
                None,
            )
        try:
            model = fit(rows)
        except ValueError as exc:  # SurrogateInputError: too few distinct points for an outcome
            if len(rows) >= self.num_init or self.constraint_models != "published":
                return context.surrogate, f"the rate chunk of {planned:,.0f} rec/s cannot be modelled yet ({exc})", planned, None
            # Too few profiles for a chunk surrogate, but the published check rests on the chunk's
            # constraint models with support: score with the replay's models at the planned rate.
            return context.surrogate, None, planned, self._chunk(obs, state, context, planned)
        return model, None, lo, self._chunk(obs, state, context, planned)

    def _chunk(self, obs: pd.DataFrame, state: JobState, context: PolicyContext, planned: float) -> Chunk:
        """The target chunk's (lower, upper, profiles at their measured rates) for the constraint models."""
        lo, hi = target_chunk(obs["input_rate"].to_numpy(dtype=float), planned, self.chunk, self._current_rate(state))
        return lo, hi, chunk_rows(obs, lo, hi, context.latency_target_ms, direct_first=self._direct_first)

    def _target_rows(self, obs: pd.DataFrame, state: JobState, context: PolicyContext, planned: float) -> pd.DataFrame:
        """The target chunk's training set (:func:`chunk_profiles` with this policy's ``chunk_training``)."""
        return chunk_profiles(
            obs, planned, context.latency_target_ms, self.chunk, self._current_rate(state), direct_first=self._direct_first
        )
