"""Profiling runs on the twin: short jobs at a constant rate, measured the way an operator would.

Use :func:`profile_configs` to produce the ``profiling_observations`` table (``PROFILING_COLUMNS``)
for a set of configurations and rates (every configuration at every rate), and
:func:`initial_design` for a space-filling first batch of candidates (it always includes the
static-max configuration). Demeter's protocol, which this follows: warm up, measure throughput,
p95 latency, CPU and memory over a window, then inject one failure just before a checkpoint is
due and time the recovery until the lag is back at its pre-failure level and stays there
(``recovery_measure="drained"``), or read it as Demeter's own profiler did, at its checks
(``"demeter"``, :mod:`flinktune.twin.recovery_checks`).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable

import numpy as np
import pandas as pd

from flinktune.config_space import ConfigSpace, Configuration, spread_design
from flinktune.metrics.schema import PROFILING_COLUMNS, PROFILING_DTYPES
from flinktune.twin.mechanics import RECOVERY_CAP_S
from flinktune.twin.noise import normal
from flinktune.twin.profile import ClusterProfile
from flinktune.twin.recovery_checks import checked_recovery_time, pre_failure_lag
from flinktune.twin.simulator import DEFAULT_START_TS, TwinJob

__all__ = [
    "PROFILE_RUN_S",
    "RATE_NOISE",
    "RECOVERY_MEASURES",
    "STABLE_S",
    "initial_design",
    "overload_horizon_s",
    "profile_configs",
    "profile_run",
    "recovery_time",
]

#: Relative per-second jitter of the profiling load generator.
RATE_NOISE = 0.02
#: Seconds the lag must stay at its pre-failure level for the job to count as recovered.
STABLE_S = 30
#: Seconds the tuner's profiling run measures before its failure (``jobs.profile``'s default, and
#: what the replay benchmark's flinktune runs measure): a steady capacity settles well within it
#: (docs/results/local-flink.md), so a longer run only spends more.
PROFILE_RUN_S = 120
#: How a profiling run's recovery is read: ``drained`` (:func:`recovery_time`, the twin's own measure
#: and flinktune's profiler's) or ``demeter`` (Demeter's profiler's checks,
#: :func:`flinktune.twin.recovery_checks.checked_recovery_time`).
RECOVERY_MEASURES = ("drained", "demeter")


def _warmup_s(duration_s: int) -> int:
    return min(60, duration_s // 5)


def overload_horizon_s(duration_s: int) -> float:
    """The ``horizon_s`` of ``steady_state`` matching a run's measurement window when overloaded.

    Lag grows from the start of the run; the window [warm-up, duration) sees it at its mean age
    (warm-up + duration) / 2, which is the steady state's horizon / 2.
    """
    return float(_warmup_s(duration_s) + duration_s)


def recovery_time(
    lag: np.ndarray, fail_index: int, rate: float, *, cap_s: float = RECOVERY_CAP_S, stable_s: int = STABLE_S
) -> float:
    """Seconds from the failure (at ``fail_index`` of a per-second lag series) until lag is back.

    "Back" means at most the pre-failure maximum (over the previous minute) plus half a second of
    input, for ``stable_s`` consecutive seconds; the recovery time is when that stretch starts.
    Returns ``cap_s`` when it never happens within the series or the cap.
    """
    threshold = pre_failure_lag(lag, fail_index) + 0.5 * rate
    after = lag[fail_index + 1 :] <= threshold
    if after.size < stable_s:
        return float(cap_s)
    runs = np.convolve(after.astype(np.int32), np.ones(stable_s, dtype=np.int32), mode="valid")
    hits = np.flatnonzero(runs == stable_s)
    if hits.size == 0:
        return float(cap_s)
    return float(min(hits[0] + 1, cap_s))


#: The reading of each of :data:`RECOVERY_MEASURES`.
_MEASURES: dict[str, Callable[[np.ndarray, int, float], float]] = {"drained": recovery_time, "demeter": checked_recovery_time}


def _measure(measure: str) -> Callable[[np.ndarray, int, float], float]:
    if measure not in _MEASURES:
        raise ValueError(f"unknown recovery measure {measure!r}; known: {', '.join(RECOVERY_MEASURES)}")
    return _MEASURES[measure]


def _run_id(job: str, cfg: Configuration, rate: float, seed: int, duration_s: int) -> str:
    key = f"{job}|{sorted(cfg.to_dict().items())}|{rate:.3f}|{seed}|{duration_s}"
    return hashlib.sha1(key.encode()).hexdigest()[:16]


def profile_run(
    profile: ClusterProfile,
    config: Configuration,
    rate: float,
    *,
    duration_s: int = 300,
    seed: int = 0,
    job: str = "profiling",
    start_ts: int = DEFAULT_START_TS,
    recovery_measure: str | Callable[[np.ndarray, int, float], float] = "drained",
) -> dict[str, object]:
    """One profiling run; returns one ``PROFILING_COLUMNS`` row as a dict (``recovery_measure``: one
    of :data:`RECOVERY_MEASURES`, or a reading ``(lag, fail_index, rate) -> seconds`` of the run's
    per-second lag, e.g. to read one run several ways: ``benchmarks/fidelity/recovery_checks_fit.py``)."""
    measure = recovery_measure if callable(recovery_measure) else _measure(recovery_measure)
    if duration_s < 60:
        raise ValueError(f"duration_s must be >= 60 s to warm up and measure, got {duration_s}")
    if not rate >= 0:
        raise ValueError(f"profiling rate must be >= 0, got {rate!r}")
    run_id = _run_id(job, config, rate, seed, duration_s)
    run_seed = int(run_id[:8], 16)
    twin = TwinJob(profile, config, job=job, seed=run_seed, start_ts=start_ts)
    warm = _warmup_s(duration_s)
    ts = start_ts + np.arange(duration_s)
    offered = rate * np.clip(1.0 + RATE_NOISE * normal(run_seed, "workload", ts), 0.0, None)
    twin.run(offered, emit=False)
    fail_at = twin.inject_failure()
    tail = fail_at - twin.now + int(RECOVERY_CAP_S) + STABLE_S + 1
    ts2 = twin.now + np.arange(tail)
    twin.run(rate * np.clip(1.0 + RATE_NOISE * normal(run_seed, "workload", ts2), 0.0, None), emit=False)
    h = twin.history()
    window = h.iloc[warm:duration_s]
    lag = h["lag"].to_numpy()
    return {
        "job": job,
        "run_id": run_id,
        "ts_ms": int(start_ts) * 1000,
        **{k: getattr(config, k) for k in ("parallelism", "task_slots", "cpu", "memory_mb", "checkpoint_interval_s")},
        "input_rate": float(window["rate"].mean()),
        "throughput": float(window["throughput"].mean()),
        "latency_ms": float(window["latency_p95_ms"].mean()),
        "recovery_s": measure(lag, fail_at - start_ts, rate),
        "cpu_used": float(window["cpu_used"].mean()),
        "memory_used_mb": float(window["memory_used_mb"].mean()),
    }


def profile_configs(
    profile: ClusterProfile,
    configs: Iterable[Configuration],
    rates: Iterable[float],
    *,
    duration_s: int = 300,
    seed: int = 0,
    job: str = "profiling",
    start_ts: int = DEFAULT_START_TS,
    recovery_measure: str = "drained",
) -> pd.DataFrame:
    """Profile every configuration at every rate; one row per run, columns ``PROFILING_COLUMNS``
    (``recovery_measure``: one of :data:`RECOVERY_MEASURES`)."""
    configs, rates = list(configs), [float(r) for r in rates]
    if not configs or not rates:
        raise ValueError(f"profiling needs at least one configuration and one rate (got {len(configs)} and {len(rates)})")
    rows = [
        profile_run(
            profile, cfg, rate, duration_s=duration_s, seed=seed, job=job, start_ts=start_ts, recovery_measure=recovery_measure
        )
        for cfg in configs
        for rate in rates
    ]
    df = pd.DataFrame(rows, columns=list(PROFILING_COLUMNS))
    return df.astype(PROFILING_DTYPES)


def initial_design(space: ConfigSpace, n: int, seed: int) -> list[Configuration]:
    """``n`` candidates spread over the space (greedy max-min distance on normalised knobs), max first."""
    if n < 1:
        raise ValueError(f"initial design size must be >= 1, got {n}")
    return spread_design(
        space, space.candidates(), n, seed, lambda cands: cands.index(space.maximum) if space.maximum in cands else 0
    )
