"""The oracle: the cheapest configuration per decision interval, knowing the future and the twin.

Use :func:`oracle_schedule` as the lower bound of the replay benchmark (docs/DESIGN.md section 7, the
"oracle (twin only)" policy): for every ``interval_s`` window of the trace it takes the true peak
rate in that window and picks the cheapest candidate (by total CPU, then total memory: the order
of ``ConfigSpace.candidates``) whose analytic steady state at that peak meets the latency target
and the recovery limit. No candidate meeting both => the static max, flagged ``feasible=False``.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from flinktune.config_space import KNOBS, ConfigSpace, Configuration
from flinktune.twin.mechanics import steady_state
from flinktune.twin.profile import ClusterProfile

__all__ = ["ORACLE_COLUMNS", "oracle_schedule"]

ORACLE_COLUMNS: tuple[str, ...] = (
    "interval_start",
    "interval_end",
    "peak_rate",
    "config",
    *KNOBS,
    "total_cpu",
    "total_memory_mb",
    "latency_ms",
    "recovery_s",
    "feasible",
)


def oracle_schedule(
    profile: ClusterProfile,
    trace: pd.Series,
    space: ConfigSpace,
    latency_target_ms: float,
    recovery_limit_s: float,
    interval_s: int = 600,
) -> pd.DataFrame:
    """One row per interval (:data:`ORACLE_COLUMNS`); ``config`` holds the :class:`Configuration`.

    ``trace`` is a rate series on a DatetimeIndex (any regular step); intervals start at its first
    timestamp. Latency is the steady-state p95 in ms.
    """
    if len(trace) == 0:
        raise ValueError("oracle: empty trace")
    if latency_target_ms <= 0 or recovery_limit_s <= 0 or interval_s < 1:
        raise ValueError(
            f"oracle: latency_target_ms, recovery_limit_s and interval_s must be positive "
            f"(got {latency_target_ms}, {recovery_limit_s}, {interval_s})"
        )
    offsets = (trace.index - trace.index[0]).total_seconds().to_numpy()
    bucket = (offsets // interval_s).astype(np.int64)
    peaks = trace.groupby(bucket).max()
    rates = peaks.to_numpy(dtype=float)
    candidates = space.candidates()
    chosen: list[Configuration | None] = [None] * rates.size
    chosen_lat = np.full(rates.size, np.nan)
    chosen_rec = np.full(rates.size, np.nan)
    open_ = np.ones(rates.size, dtype=bool)
    for cfg in candidates:  # cheapest first: the first feasible one wins
        if not open_.any():
            break
        idx = np.flatnonzero(open_)
        ss = steady_state(profile, cfg, rates[idx])
        ok = (
            (ss["latency_ms"] <= latency_target_ms)
            & (ss["recovery_s"] <= recovery_limit_s)
            & (ss["throughput"] >= rates[idx] * 0.999)
        )
        for i in idx[ok]:
            chosen[i] = cfg
        chosen_lat[idx[ok]] = ss["latency_ms"][ok]
        chosen_rec[idx[ok]] = ss["recovery_s"][ok]
        open_[idx[ok]] = False
    feasible = ~open_
    if open_.any():
        ss = steady_state(profile, space.maximum, rates[open_])
        for i in np.flatnonzero(open_):
            chosen[i] = space.maximum
        chosen_lat[open_], chosen_rec[open_] = ss["latency_ms"], ss["recovery_s"]
    starts = trace.index[0] + pd.to_timedelta(peaks.index.to_numpy() * interval_s, unit="s")
    rows = {
        "interval_start": starts,
        "interval_end": starts + pd.Timedelta(seconds=interval_s),
        "peak_rate": rates,
        "config": chosen,
        **{k: [getattr(c, k) for c in chosen] for k in KNOBS},
        "total_cpu": [c.total_cpu for c in chosen],  # type: ignore[union-attr]  # every slot is set above (open ones get the maximum)
        "total_memory_mb": [c.total_memory_mb for c in chosen],  # type: ignore[union-attr]  # every slot is set above (open ones get the maximum)
        "latency_ms": chosen_lat,
        "recovery_s": chosen_rec,
        "feasible": feasible,
    }
    return pd.DataFrame(rows, columns=list(ORACLE_COLUMNS))
