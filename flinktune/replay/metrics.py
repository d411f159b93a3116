"""The replay benchmark's measures, absolute per run and relative to static (docs/DESIGN.md section 7).

Use :func:`summarize` on a twin's per-second history to get one row of :data:`SUMMARY_COLUMNS`,
and :func:`relative_table` to divide the cost and latency columns by static's. Definitions:

- CPU core-hours / memory GiB-hours: reserved by the job's TaskManagers, plus every profiling
  run (its configuration's reservation for as long as it ran);
- latency p50 / p95 / p99: the run-wide quantile of the per-second p50 / p95 / p99 samples;
- observed latency p50 / p95 / p99 (:data:`OBSERVED_LATENCY_COLUMNS`, beside the row, not in the
  tables): the latency as a real run's metrics report it, for comparing with measured runs only: the
  run-wide median, 95th and 99th percentile of ONE series, the per-second p95, over the seconds the job
  runs (a stopped job's latency histogram reports nothing; Demeter's evaluation took its latency
  figures from the samples of such a metric, docs/baselines.md, demeter);
- mean lag: records; recovery: for every failure (scheduled or from memory pressure), seconds
  until the lag is back to its pre-failure level for 30 s (capped at 600 s): the mean, the
  worst and the count over the limit;
- reconfigurations: changes actually carried out; downtime: seconds the job did not run.

:func:`detector_recovery_time` is a second recovery measure, for comparing with Demeter's
measured recoveries only (``benchmarks/fidelity/twin_fidelity.py``): it follows the anomaly detector that
measured them (docs/baselines.md, demeter), which declares a recovery only after a run of normal points and so
never reports less than about 95 s. The replay's own measure above stays the twin's: it says when the
job is back, not when a detector would notice.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from flinktune.twin.profiling import recovery_time
from flinktune.twin.recovery_checks import pre_failure_lag

__all__ = [
    "DETECTOR",
    "OBSERVED_LATENCY_COLUMNS",
    "RELATIVE_COLUMNS",
    "SUMMARY_COLUMNS",
    "DetectorSettings",
    "detector_recovery_time",
    "observed_latency",
    "recoveries",
    "relative_table",
    "summarize",
]

SUMMARY_COLUMNS: tuple[str, ...] = (
    "cpu_core_hours",
    "memory_gib_hours",
    "profiling_cpu_core_hours",
    "profiling_memory_gib_hours",
    "profiling_runs",
    "latency_p50_ms",
    "latency_p95_ms",
    "latency_p99_ms",
    "mean_lag",
    "failures",
    "recovery_mean_s",
    "recovery_max_s",
    "recoveries_over_limit",
    "reconfigurations",
    "downtime_s",
)
#: Extra keys of :func:`summarize`'s row: the latency as a real run's metric reports it (module docstring).
OBSERVED_LATENCY_COLUMNS: tuple[str, ...] = ("observed_latency_p50_ms", "observed_latency_p95_ms", "observed_latency_p99_ms")
#: Columns reported as a ratio to static's (the others stay absolute).
RELATIVE_COLUMNS: tuple[str, ...] = (
    "cpu_core_hours",
    "memory_gib_hours",
    "latency_p50_ms",
    "latency_p95_ms",
    "latency_p99_ms",
    "mean_lag",
)


@dataclass(frozen=True)
class DetectorSettings:
    """How Demeter's profiler detects a recovery (docs/baselines.md, demeter): it waits ``wait_s`` after the
    fault (Flink's 20 s timeout), then reads the job's series as points of ``point_s`` seconds
    and calls the job recovered after ``points`` consecutive normal points; recovery time is the
    wait plus that, ``cap_s`` when it never happens. ``point_s`` = 5 s is [inferred]: with 15
    points it puts the floor at 20 + 75 = 95 s, the measured static recoveries' median (minimum 93 s)."""

    wait_s: int = 20
    point_s: int = 5
    points: int = 15
    cap_s: float = 360.0


#: The settings of Demeter's published profiler.
DETECTOR = DetectorSettings()


def detector_recovery_time(lag: np.ndarray, fail_index: int, rate: float, settings: DetectorSettings = DETECTOR) -> float:
    """Recovery after the fault at ``fail_index`` of a per-second lag series, as Demeter's detector reports it.

    A point is normal when every second of it has the lag back at the level the twin's own measure
    uses (:func:`flinktune.twin.profiling.recovery_time`: the pre-failure minute's maximum plus half
    a second of input). The detector only sees points after its wait, so a job that never fell
    behind reads ``wait_s + points x point_s``. Returns ``cap_s`` when there are too few seconds left.
    """
    s = settings
    threshold = pre_failure_lag(lag, fail_index) + 0.5 * rate
    start = fail_index + s.wait_s
    k = int((s.cap_s - s.wait_s) // s.point_s)
    seg = lag[start : start + k * s.point_s]
    k = len(seg) // s.point_s
    if k < s.points:
        return float(s.cap_s)
    normal = (seg[: k * s.point_s].reshape(k, s.point_s) <= threshold).all(axis=1)
    runs = np.convolve(normal.astype(np.int32), np.ones(s.points, dtype=np.int32), mode="valid")
    hits = np.flatnonzero(runs == s.points)
    if hits.size == 0:
        return float(s.cap_s)
    return float(min(s.wait_s + (hits[0] + s.points) * s.point_s, s.cap_s))


def _failure_indices(hist: pd.DataFrame) -> np.ndarray:
    restarts = hist["restarts"].to_numpy()
    return np.flatnonzero(np.diff(restarts, prepend=restarts[0] if len(restarts) else 0) > 0)


def _recoveries(hist: pd.DataFrame) -> np.ndarray:
    lag, rate = hist["lag"].to_numpy(), hist["rate"].to_numpy()
    return np.array([recovery_time(lag, int(i), float(rate[i])) for i in _failure_indices(hist)])


def recoveries(hist: pd.DataFrame, settings: DetectorSettings = DETECTOR) -> pd.DataFrame:
    """One row per failure of a twin history: ``ts``, the twin's ``recovery_s`` and the
    detector-like ``detector_recovery_s`` (:func:`detector_recovery_time`)."""
    lag, rate, ts = hist["lag"].to_numpy(), hist["rate"].to_numpy(), hist["ts"].to_numpy()
    idx = _failure_indices(hist)
    return pd.DataFrame(
        {
            "ts": ts[idx],
            "recovery_s": [recovery_time(lag, int(i), float(rate[i])) for i in idx],
            "detector_recovery_s": [detector_recovery_time(lag, int(i), float(rate[i]), settings) for i in idx],
        }
    )


def summarize(
    hist: pd.DataFrame, reconfigurations: list[dict[str, Any]], models: Any | None, recovery_limit_s: float
) -> dict[str, float]:
    """One row of :data:`SUMMARY_COLUMNS`, plus :data:`OBSERVED_LATENCY_COLUMNS`, from a twin history (one
    row per second)."""
    if hist.empty:
        raise ValueError("replay summary: the twin history is empty (nothing was run)")
    prof_cpu = (models.cpu_core_s / 3600.0) if models is not None else 0.0
    prof_mem = (models.memory_mb_s / 1024.0 / 3600.0) if models is not None else 0.0
    rec = _recoveries(hist)
    return {
        "cpu_core_hours": float(hist["total_cpu"].sum() / 3600.0 + prof_cpu),
        "memory_gib_hours": float(hist["total_memory_mb"].sum() / 1024.0 / 3600.0 + prof_mem),
        "profiling_cpu_core_hours": float(prof_cpu),
        "profiling_memory_gib_hours": float(prof_mem),
        "profiling_runs": float(models.runs if models is not None else 0),
        "latency_p50_ms": float(np.quantile(hist["latency_p50_ms"], 0.50)),
        "latency_p95_ms": float(np.quantile(hist["latency_p95_ms"], 0.95)),
        "latency_p99_ms": float(np.quantile(hist["latency_p99_ms"], 0.99)),
        "mean_lag": float(hist["lag"].mean()),
        "failures": float(rec.size),
        "recovery_mean_s": float(rec.mean()) if rec.size else 0.0,
        "recovery_max_s": float(rec.max()) if rec.size else 0.0,
        "recoveries_over_limit": float((rec > recovery_limit_s).sum()),
        "reconfigurations": float(sum(1 for r in reconfigurations if r.get("mode") != "noop")),
        "downtime_s": float((hist["running"] < 0.5).sum()),
        **observed_latency(hist),
    }


def observed_latency(hist: pd.DataFrame) -> dict[str, float]:
    """:data:`OBSERVED_LATENCY_COLUMNS` of a twin history: the median, 95th and 99th percentile of the
    per-second p95 latency over the seconds the job runs (NaN when it never runs). Why: the twin gives
    a stopped second the wait of the records piling up, which no real metric reports; measured the
    same way, a change's downtime weighs what the real run's samples let it weigh."""
    lat = hist["latency_p95_ms"].to_numpy(dtype=float)[hist["running"].to_numpy(dtype=float) >= 0.5]
    if lat.size == 0:
        return dict.fromkeys(OBSERVED_LATENCY_COLUMNS, float("nan"))
    return dict(zip(OBSERVED_LATENCY_COLUMNS, (float(q) for q in np.quantile(lat, (0.50, 0.95, 0.99)))))


def relative_table(summaries: dict[str, dict[str, float]], reference: str = "static") -> pd.DataFrame:
    """Policies x columns: :data:`RELATIVE_COLUMNS` divided by ``reference``'s, the rest absolute."""
    if reference not in summaries:
        raise ValueError(f"relative table: the reference policy {reference!r} was not replayed (have {sorted(summaries)})")
    ref = summaries[reference]
    rows = {}
    for name, s in summaries.items():
        row = dict(s)
        for c in RELATIVE_COLUMNS:
            row[c] = s[c] / ref[c] if ref[c] else float("nan")
        rows[name] = row
    return pd.DataFrame.from_dict(rows, orient="index")[list(SUMMARY_COLUMNS)]
