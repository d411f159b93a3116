"""The cheapest fixed configuration that meets the SLO on a scenario, found with hindsight on the twin.

Use :func:`cheapest_fixed` beside a scenario's policies: it replays the trace at one configuration
held all the time (no decisions, no changes; the same seed and failure schedule as every policy) and
searches the configuration space, cheapest first, for one that meets the scenario's SLO against the
static maximum on the same run (:func:`flinktune.replay.metrics.summarize` figures, minutes over the
target counted as the robustness page counts them). It knows the whole trace, so no policy can pick
it ahead of time; a policy that costs more than it never earned its changes. The search gallops up the
price levels (one configuration per level: of those whose analytic steady state carries the trace's
99.5th-percentile rate, the one that recovers fastest) and then bisects back down, so it assumes a
dearer level does no worse; the figure is an achievable cost, not a proven minimum.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from flinktune.config_space import ConfigSpace, Configuration
from flinktune.pricing import PriceList
from flinktune.replay.metrics import summarize
from flinktune.twin.mechanics import steady_state
from flinktune.twin.profile import ClusterProfile
from flinktune.twin.simulator import TwinJob

__all__ = ["HINDSIGHT", "cheapest_fixed", "fixed_run", "minutes_over_target"]

#: The row's name among the policies of a scenario (never a competitor: it knows the future).
HINDSIGHT = "hindsight-fixed"


def minutes_over_target(hist: pd.DataFrame, target_ms: float) -> int:
    """Minutes of a twin history (one row per second) whose p95 exceeds ``target_ms``: a minute's p95
    is the 95th percentile of its per-second p95 samples (3 of its 60 seconds may be above it)."""
    lat = hist["latency_p95_ms"].to_numpy(dtype=float)
    if lat.size == 0:
        return 0
    per_minute = pd.Series(lat).groupby(np.arange(lat.size) // 60).quantile(0.95)
    return int((per_minute > target_ms).sum())


def fixed_run(
    trace: pd.Series,
    profile: ClusterProfile,
    config: Configuration,
    *,
    seed: int,
    failures: str,
    target_ms: float,
    limit_s: float,
) -> dict[str, Any]:
    """The twin at ``config`` for the whole ``trace`` (as a policy's replay starts it): its summary and minutes over target."""
    twin = TwinJob(
        profile, config, job="fixed", seed=seed, start_ts=int(trace.index[0].timestamp()), failures=failures, retain_s=60
    )
    twin.run(trace.to_numpy(dtype=float))
    hist = twin.history()
    return {"summary": summarize(hist, [], None, limit_s), "minutes_over": minutes_over_target(hist, target_ms)}


def _levels(profile: ClusterProfile, space: ConfigSpace, rate: float, prices: PriceList) -> list[Configuration]:
    """One configuration per price level below the maximum's, cheapest first: of those whose steady
    state carries ``rate``, the one that recovers from a failure fastest."""
    by_price: dict[float, tuple[float, Configuration]] = {}
    for cfg in space.candidates():
        ss = steady_state(profile, cfg, np.array([rate]))
        if float(ss["throughput"][0]) < rate * 0.999:
            continue
        price = round(float(prices.cost(cfg.total_cpu, cfg.total_memory_mb / 1024.0)), 9)
        # The fastest recovery first (failures dominate the minutes over target of a size that carries the load).
        score = -float(ss["recovery_s"][0]) + 1e-9 * float(ss["capacity"][0])
        if price not in by_price or score > by_price[price][0]:
            by_price[price] = (score, cfg)
    top = float(prices.cost(space.maximum.total_cpu, space.maximum.total_memory_mb / 1024.0))
    return [by_price[p][1] for p in sorted(by_price) if p < top]


def cheapest_fixed(
    trace: pd.Series,
    profile: ClusterProfile,
    space: ConfigSpace,
    prices: PriceList,
    *,
    seed: int,
    failures: str,
    target_ms: float,
    limit_s: float,
    p95_limit: float,
    allowance: float,
) -> dict[str, Any]:
    """The cheapest fixed configuration found that meets the SLO (p95 <= ``p95_limit`` x static's,
    minutes over target <= static's + ``allowance`` x the minutes, no recovery over ``limit_s``), as a
    policy row (``summary``, ``minutes_over``) plus ``config`` and ``tried`` (runs made); the static
    maximum when no cheaper one does."""
    args: dict[str, Any] = {"seed": seed, "failures": failures, "target_ms": target_ms, "limit_s": limit_s}
    static = fixed_run(trace, profile, space.maximum, **args)
    budget = static["minutes_over"] + allowance * int(np.ceil(len(trace) / 60))
    p95_cap = p95_limit * static["summary"]["latency_p95_ms"]

    def meets(run: dict[str, Any]) -> bool:
        s = run["summary"]
        return bool(s["latency_p95_ms"] <= p95_cap and run["minutes_over"] <= budget and s["recoveries_over_limit"] == 0)

    levels = _levels(profile, space, float(np.quantile(trace.to_numpy(dtype=float), 0.995)), prices)
    runs: dict[int, dict[str, Any]] = {}

    def run_at(i: int) -> dict[str, Any]:
        if i not in runs:
            runs[i] = fixed_run(trace, profile, levels[i], **args)
        return runs[i]

    # Gallop up the levels (1, 2, 4, ... steps) to one that meets the SLO, then bisect between it and the last that failed.
    lo, step, hi = -1, 1, None
    i = 0
    while i < len(levels):
        if meets(run_at(i)):
            hi = i
            break
        lo, i, step = i, i + step, step * 2
    if hi is None:
        found, config = static, space.maximum
    else:
        while hi - lo > 1:
            mid = (lo + hi) // 2
            if meets(run_at(mid)):
                hi = mid
            else:
                lo = mid
        found, config = runs[hi], levels[hi]
    return {**found, "config": config.describe(), "tried": len(runs) + 1}
