"""Demeter's profiling thread: which configurations it accepts as suggestions, how much of the cluster a
round may reserve, and how the suggestions are drawn.

Use :func:`profiling_candidates` for the accepted set at a rate, :func:`profiling_budget` for the
round's CPU and memory, then :func:`sobol_suggestions` while the target chunk's optimiser is still
quasi-random (the allowed candidates in an order seeded by the chunk's bounds, packed into the budget)
or :func:`model_suggestions` once it models the chunk (qNEHVI on the chunk's own models with Demeter's
reference point, packed into the budget in the acquisition's order). The published profiling decision
and what is inferred rather than reproduced are in ``docs/baselines.md`` (demeter: profiling decision).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import pandas as pd

from flinktune.config_space import ConfigSpace, Configuration
from flinktune.decision import JobState
from flinktune.policies.demeter_chunks import chunk_profiles, target_chunk
from flinktune.policies.demeter_constraints import ConstraintModels
from flinktune.policies.demeter_ranking import demeter_reference

__all__ = [
    "model_suggestions",
    "pack_budget",
    "profiling_budget",
    "profiling_candidates",
    "sobol_suggestions",
]


def _configs(rows: pd.DataFrame) -> set[Configuration]:
    return {
        Configuration(int(r.parallelism), int(r.task_slots), float(r.cpu), int(r.memory_mb), int(r.checkpoint_interval_s))
        for r in rows.itertuples(index=False)
    }


def profiling_candidates(
    space: ConfigSpace,
    state: JobState,
    obs: pd.DataFrame | None,
    rate: float,
    latency_target_ms: float,
    chunk: float,
    current_rate: float | None,
    *,
    ref_scale: bool = True,
) -> list[Configuration]:
    """The candidates Demeter accepts as profiling suggestions at ``rate``: not the production
    configuration, not a configuration whose profile fell behind (latency over the target) at a
    lower rate, nor one already profiled in the rate chunk of ``rate`` (``obs``: the profiles so
    far, or None); with ``ref_scale``, also larger than ``ref_scale_factor`` x the production job's
    reserved CPU and memory (0.25 when its latency is good, 0.75 when not). The published optimiser
    applies that size rule only once its model predicts; while it is quasi-random it does not."""
    cur = state.config
    factor = (0.25 if state.latency_p95_ms <= latency_target_ms else 0.75) if ref_scale else 0.0
    excluded: set[Configuration] = {cur.with_(vertex_parallelism={})}  # and those known or profiled
    if obs is not None and len(obs):
        excluded |= _configs(chunk_profiles(obs, rate, latency_target_ms, chunk, current_rate))
        lo, _ = target_chunk(obs["input_rate"].to_numpy(dtype=float), rate, chunk, current_rate)
        excluded |= _configs(obs[(obs["latency_ms"] > latency_target_ms) & (obs["input_rate"] <= lo)])
    return [
        c
        for c in space.candidates()
        if c.total_cpu >= factor * cur.total_cpu and c.total_memory_mb >= factor * cur.total_memory_mb and c not in excluded
    ]


def profiling_budget(
    config: Configuration, n_trials: int, cluster_cpu: float, cluster_memory_mb: float, factor: float
) -> tuple[float, float]:
    """(CPU, memory MB) a profiling round may reserve in all: the cluster share (``cpuConst``,
    ``memConst``) less the production job's ``config``, shrunk by ``factor`` per completed trial."""
    shrink = factor**n_trials
    return (
        max(0.0, cluster_cpu - config.total_cpu) * shrink,
        max(0.0, cluster_memory_mb - config.total_memory_mb) * shrink,
    )


def pack_budget(configs: Sequence[Configuration], cpu_cap: float, mem_cap: float) -> list[Configuration]:
    """The ``configs`` accepted in order while the round's total CPU and memory still fit the budget
    (a suggestion that would overflow it is passed over and the next one tried, as published)."""
    out: list[Configuration] = []
    used_cpu = used_mem = 0.0
    for c in configs:
        if c in out:
            continue
        if used_cpu + c.total_cpu <= cpu_cap + 1e-9 and used_mem + c.total_memory_mb <= mem_cap + 1e-9:
            out.append(c)
            used_cpu, used_mem = used_cpu + c.total_cpu, used_mem + c.total_memory_mb
    return out


def sobol_suggestions(
    candidates: Sequence[Configuration], bounds: tuple[float, float], cpu_cap: float, mem_cap: float
) -> list[Configuration]:
    """The quasi-random phase's suggestions: ``candidates`` (the accepted set) in a random order
    seeded by the sum of the target chunk's ``bounds`` (the published Sobol seed), packed into the
    budget. The same chunk gives the same order at every round; profiled ones drop out."""
    order = np.random.default_rng(int(round(sum(bounds))) % (2**32)).permutation(len(candidates))
    return pack_budget([candidates[int(i)] for i in order], cpu_cap, mem_cap)


class _ChunkOutcomes:
    """The chunk's constraint models in the face :func:`~models.surrogate.acquisition.suggest_profiling`
    reads (``outcome_model``); the chunk models have no rate input."""

    def __init__(self, fit: ConstraintModels) -> None:
        self._models = {"latency": fit.latency, "recovery": fit.recovery}

    def outcome_model(self, outcome: str, rate: float) -> object:
        return self._models[outcome]


def model_suggestions(
    fit: ConstraintModels,
    space: ConfigSpace,
    candidates: Sequence[Configuration],
    profiled: pd.DataFrame,
    cpu_cap: float,
    mem_cap: float,
    recovery_limit_s: float,
    *,
    max_suggestions: int = 6,
    seed: int = 0,
) -> list[Configuration]:
    """The modelled phase's suggestions: up to ``max_suggestions`` of the accepted ``candidates``,
    each within the budget on its own, by qNEHVI on the chunk's models ``fit`` (constraints:
    Demeter's normalised latency ``<= 0.5``, recovery ``<= recovery_limit_s``), improving on the
    configurations of the chunk's ``profiled`` rows (its training set); then packed into the budget
    in that order."""
    from models.surrogate.acquisition import suggest_profiling

    inside = [c for c in candidates if c.total_cpu <= cpu_cap + 1e-9 and c.total_memory_mb <= mem_cap + 1e-9]
    if not inside:
        return []
    # The baseline: the chunk's profiled configurations that lie in the space (a GP reads any).
    base = sorted(_configs(profiled) - set(inside), key=repr)
    X = np.array([space.normalise(c) for c in [*inside, *base]], dtype=float).reshape(-1, len(space.normalise(inside[0])))
    in_space = np.all((X >= 0.0) & (X <= 1.0), axis=1)
    keep = np.flatnonzero(in_space | (np.arange(len(X)) < len(inside)))
    pool, X = [[*inside, *base][int(i)] for i in keep], X[keep]
    idx = suggest_profiling(
        _ChunkOutcomes(fit),
        X,
        1.0,  # the chunk's models have no rate input
        latency_limit_log=math.log1p(0.5),
        recovery_limit_log=math.log(recovery_limit_s),
        budget_mask=np.arange(len(pool)) < len(inside),
        reserved=np.array([(c.total_cpu, c.total_memory_mb) for c in pool], dtype=float),
        q=min(int(max_suggestions), len(inside)),
        seed=seed,
        profiled=list(range(len(inside), len(pool))) or None,
        outcomes=("latency", "recovery"),
        ref_point=[-r for r in demeter_reference(space)],  # in the maximised -log(reserved)
    )
    return pack_budget([pool[int(i)] for i in idx], cpu_cap, mem_cap)
