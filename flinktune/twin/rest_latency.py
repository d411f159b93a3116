"""The p95 latency a job has at rest, and the one-line warning for a latency target below it.

Use :func:`rest_p95_ms` on a twin profile (the analytic steady state at almost no load) or
:func:`measured_rest_p95_ms` on a job's per-minute features (its best minute), then
:func:`target_warning` before a run: a target below the latency at rest cannot be met by any
configuration, so a tuner keeps the largest one and every latency figure reads as a miss.
"""

from __future__ import annotations

import pandas as pd

from flinktune.config_space import Configuration
from flinktune.twin.mechanics import steady_state
from flinktune.twin.profile import ClusterProfile

__all__ = ["measured_rest_p95_ms", "rest_p95_ms", "target_warning"]


def rest_p95_ms(profile: ClusterProfile, config: Configuration) -> float:
    """The twin's p95 latency on ``config`` at one record a second: what no sizing can go below."""
    return float(steady_state(profile, config, 1.0)["latency_ms"][0])


def measured_rest_p95_ms(features: pd.DataFrame) -> float | None:
    """The lowest per-minute p95 in ``features`` (``latency_p95_ms``), None without any minute."""
    lat = features["latency_p95_ms"].dropna() if "latency_p95_ms" in features else pd.Series(dtype=float)
    return float(lat.min()) if len(lat) else None


def target_warning(target_ms: float, rest_ms: float | None, basis: str) -> str | None:
    """One line when ``target_ms`` is below ``rest_ms`` (``basis`` says where that figure comes from), else None."""
    if rest_ms is None or target_ms >= rest_ms:
        return None
    return (
        f"warning: the latency target {target_ms:,.0f} ms is below the job's p95 at rest, {rest_ms:,.0f} ms ({basis}): "
        "no configuration can meet it; choose a target above it"
    )
