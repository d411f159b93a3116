"""Demeter's workload-rate chunks: which profiles each per-rate model is fitted on.

Use :func:`chunk_profiles` for the target chunk of a planned rate, :func:`chunk_rows` for the
profiles of any chunk and :func:`support_chunks` for the higher chunks whose models support the
target one (RGPE). The rate axis is cut into chunks of ``chunk`` rec/s (10k published) from the
lowest profiled, current or planned rate; a profile belongs to a chunk when it lies inside it, or
above it with a good latency, or below it with a bad one; one per configuration. With
``direct_first`` a chunk holding at least ``num_init`` profiles of its own, good and bad latencies
among them, is trained on those alone (the published ``_filter_by_num_init``). The published rules
are in ``docs/baselines.md`` (demeter: per-rate models).
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

__all__ = ["chunk_profiles", "chunk_rows", "support_chunks", "target_chunk"]

_KNOBS = ["parallelism", "task_slots", "cpu", "memory_mb", "checkpoint_interval_s"]


def target_chunk(rates: np.ndarray, rate: float, chunk: float, current_rate: float | None = None) -> tuple[float, float]:
    """(lower, upper) of Demeter's target chunk for the planned ``rate`` (docs/baselines.md, demeter): chunks of
    ``chunk`` rec/s from the lowest of the profiled ``rates``, ``current_rate`` and ``rate``; the
    first whose lower bound is at or above ``rate``."""
    start = min([rate, *([float(np.min(rates))] if len(rates) else []), *([current_rate] if current_rate is not None else [])])
    lo = start + math.ceil((rate - start) / chunk - 1e-9) * chunk
    return lo, lo + chunk


def chunk_profiles(
    obs: pd.DataFrame,
    rate: float,
    latency_target_ms: float,
    chunk: float,
    current_rate: float | None = None,
    *,
    direct_first: bool = False,
) -> pd.DataFrame:
    """Demeter's training set for the target chunk of ``rate`` (docs/baselines.md, demeter): chunks of ``chunk``
    rec/s from the lowest profiled, current (``current_rate``) or planned rate; the target chunk is
    the *first chunk whose lower bound is at or above* ``rate`` (the chunk above the planned rate,
    not the one holding it); it holds the profiles inside it (bounds included), those above it with
    a good latency (<= ``latency_target_ms``) and those below it with a bad one; one per
    configuration, the one closest to the chunk's upper bound. ``input_rate`` is set to the chunk's
    lower bound: the chunk's model has no rate input. ``direct_first``: see :func:`chunk_rows`."""
    lo, hi = target_chunk(obs["input_rate"].to_numpy(dtype=float), rate, chunk, current_rate)
    return chunk_rows(obs, lo, hi, latency_target_ms, direct_first=direct_first).assign(input_rate=lo)


def chunk_rows(
    obs: pd.DataFrame, lo: float, hi: float, latency_target_ms: float, *, direct_first: bool = False, num_init: int = 3
) -> pd.DataFrame:
    """The profiles Demeter assigns to the chunk ``[lo, hi]`` (docs/baselines.md, demeter): inside it (bounds
    included), above it with a good latency, below it with a bad one; one per configuration, the
    closest to ``hi``. Rows keep their measured ``input_rate``.

    ``direct_first`` applies the published training-set filter (``_filter_by_num_init``): when at
    least ``num_init`` of those rows lie inside the chunk and they hold a good and a bad latency,
    only the rows inside it are kept. The published optimiser counts its attached profiles as
    completed trials, so this set also sizes the profiling budget."""
    r = obs["input_rate"].to_numpy(dtype=float)
    good = obs["latency_ms"].to_numpy(dtype=float) <= latency_target_ms
    keep = ((r >= lo) & (r <= hi)) | ((r > hi) & good) | ((r < lo) & ~good)
    sel = obs[keep].assign(_d=np.abs(r[keep] - hi)).sort_values("_d", kind="stable")
    rows = sel.drop_duplicates(_KNOBS, keep="first").drop(columns="_d").reset_index(drop=True)
    if direct_first:
        rr = rows["input_rate"].to_numpy(dtype=float)
        inside = (rr >= lo) & (rr <= hi)
        ok = rows["latency_ms"].to_numpy(dtype=float) <= latency_target_ms
        if inside.sum() >= num_init and (inside & ok).any() and (inside & ~ok).any():
            rows = rows[inside].reset_index(drop=True)
    return rows


def support_chunks(
    obs: pd.DataFrame,
    target_hi: float,
    chunk: float,
    latency_target_ms: float,
    max_support: int = 2,
    min_rows: int = 3,
    *,
    direct_first: bool = False,
) -> list[tuple[float, float, pd.DataFrame]]:
    """Demeter's support chunks for a target chunk ending at ``target_hi`` (docs/baselines.md, demeter): the
    higher chunks (``[target_hi + k chunk, target_hi + (k + 1) chunk]``, up to the highest profiled
    rate) holding at least ``min_rows`` profiles, the closest ``max_support`` of them; each trained
    on :func:`chunk_rows` (``direct_first`` as there)."""
    out: list[tuple[float, float, pd.DataFrame]] = []
    top = float(obs["input_rate"].max()) if len(obs) else target_hi
    lo = target_hi
    while lo <= top + 1e-9 and len(out) < max_support:
        rows = chunk_rows(obs, lo, lo + chunk, latency_target_ms, direct_first=direct_first)
        if len(rows) >= min_rows:
            out.append((lo, lo + chunk, rows))
        lo += chunk
    return out
