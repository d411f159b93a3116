"""Demeter's profiling thread (ANCHORS.md 1.5, profiling decision): which configurations it accepts
as suggestions, and how much of the cluster a round may reserve.

Use :func:`profiling_candidates` for the accepted set at a rate and :func:`profiling_budget` for the
round's CPU and memory; :class:`~flinktune.policies.demeter.DemeterPolicy` does, with the target
chunk's training set (:func:`~flinktune.policies.demeter_chunks.chunk_profiles`) as the trial count.
"""

from __future__ import annotations

import pandas as pd

from flinktune.config_space import ConfigSpace, Configuration
from flinktune.decision import JobState
from flinktune.policies.demeter_chunks import chunk_profiles, target_chunk

__all__ = ["profiling_budget", "profiling_candidates"]


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
) -> list[Configuration]:
    """The candidates Demeter accepts as profiling suggestions at ``rate``: larger than
    ``ref_scale_factor`` x the production job's reserved CPU and memory (0.25 when its latency is
    good, 0.75 when not), and not a configuration whose profile fell behind (latency over the
    target) at a lower rate, nor one already profiled in the rate chunk of ``rate`` (``obs``: the
    profiles so far, or None)."""
    cur = state.config
    factor = 0.25 if state.latency_p95_ms <= latency_target_ms else 0.75
    bottlenecked: set[Configuration] = set()  # and those already profiled in the chunk
    if obs is not None and len(obs):
        bottlenecked |= _configs(chunk_profiles(obs, rate, latency_target_ms, chunk, current_rate))
        lo, _ = target_chunk(obs["input_rate"].to_numpy(dtype=float), rate, chunk, current_rate)
        bottlenecked |= _configs(obs[(obs["latency_ms"] > latency_target_ms) & (obs["input_rate"] <= lo)])
    return [
        c
        for c in space.candidates()
        if c.total_cpu >= factor * cur.total_cpu and c.total_memory_mb >= factor * cur.total_memory_mb and c not in bottlenecked
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
