"""Metric quality gates: is a window of raw samples fit to decide on? Pure functions, no I/O.

Use :func:`quality_problems` on the samples the decision loop fetched, with the configuration in
force; each returned string is a reason to hold, written for a person (the guard holds on any).
The rules:

- **frozen**: the live metrics (offered rate, throughput, backlog, p95 latency) kept one value for
  ``frozen_after_s`` while samples kept arriving: a metrics pipeline that stopped refreshing;
- **duplicates and overlaps**: two samples of one series at the same timestamp, or closer than
  ``min_step_ms`` (overlapping raw files, two scrapers): sums over them would be inflated;
- **staleness**: the newest sample is older than ``max_staleness_s``;
- **units out of physical range for the configuration in force**: CPU used above the cores
  reserved (with ``cpu_slack``; a percentage read as cores), heap used above the memory
  configured (bytes read as MB), latency below 1 ms (seconds read as milliseconds);
- **configuration**: the newest ``config*`` samples report another configuration than the one the
  cluster says is in force (metrics of another deployment, a stale exporter).

The ETL's contracts carry the same unit rules (``data_contracts/contracts/features_*.yaml``,
rules ``row.latency_in_milliseconds``, ``row.cpu_within_cores_reserved`` and
``row.heap_within_memory_configured``), so a batch the gate would hold on is flagged there too.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from flinktune.config_space import Configuration
from flinktune.metrics.schema import CONFIG_METRICS

__all__ = [
    "CPU_SLACK",
    "FROZEN_WINDOW_SHARE",
    "LIVE_METRICS",
    "MIN_LATENCY_MS",
    "MIN_STEP_MS",
    "config_problems",
    "duplicate_problems",
    "frozen_for_s",
    "frozen_limit_s",
    "label_rows",
    "quality_problems",
    "staleness_problem",
    "unit_problems",
]

#: The metrics whose values must move while a job runs (summed over subtasks per timestamp).
LIVE_METRICS: tuple[str, ...] = ("workloadRate", "numRecordsOutPerSecond", "pendingRecords", "latencyP95Ms")
#: End-to-end latency below this is a unit error (seconds stored as milliseconds), not a fast job.
MIN_LATENCY_MS = 1.0
#: CPU used may exceed the cores reserved by this factor (bursting above requests) before it is a unit error.
CPU_SLACK = 1.5
#: Two samples of one series closer than this are overlapping sources (no scraper samples faster).
MIN_STEP_MS = 250
#: The frozen rule fires on a frozen span of at most this share of the evaluated window.
FROZEN_WINDOW_SHARE = 0.75
_LATENCIES = ("latencyP50Ms", "latencyP95Ms", "latencyP99Ms")
_KEY = ["metric", "vertex", "subtask", "ts_ms"]


def frozen_limit_s(frozen_after_s: float, window_s: float) -> float:
    """The frozen rule's limit for a window of ``window_s``: ``frozen_after_s``, but at most
    :data:`FROZEN_WINDOW_SHARE` of the window. A frozen span measured inside the window is shorter
    than the window (it runs from the first sample to the newest), so a limit as long as the window
    could never be reached; with the share, a window frozen from end to end always holds."""
    return min(float(frozen_after_s), FROZEN_WINDOW_SHARE * float(window_s))


def frozen_for_s(df: pd.DataFrame, newest: float) -> float:
    """Seconds (up to ``newest``) over which every live metric kept one value per sample, 0 when one moved.

    A metric's per-sample value is its sum over subtasks and vertices; the span runs back from the
    newest sample to the last change of any live metric (or to the first sample, when none changed).
    """
    live = df[df["metric"].isin(LIVE_METRICS)]
    if live.empty:
        return 0.0
    table = live.groupby(["ts_ms", "metric"], observed=True)["value"].sum().unstack("metric").sort_index()
    if len(table) < 3:
        return 0.0
    changed = (table.diff().abs() > 0).any(axis=1).to_numpy()
    changed[0] = False
    last_change = table.index[np.flatnonzero(changed)[-1]] if changed.any() else table.index[0]
    return newest - float(last_change) / 1000.0


def _may_overlap(df: pd.DataFrame, min_step_ms: int) -> bool:
    """False when no two samples of one series are less than ``min_step_ms`` apart (duplicates
    included): one sort of integer codes, so a clean window skips the slower search for an example."""
    keys = [pd.factorize(df[c])[0] for c in ("metric", "vertex", "subtask")]
    ts = df["ts_ms"].to_numpy()
    order = np.lexsort((ts, *reversed(keys)))
    same = np.ones(len(order) - 1, dtype=bool)
    for k in keys:
        same &= k[order][1:] == k[order][:-1]
    return bool((same & (np.diff(ts[order]) < min_step_ms)).any())


def duplicate_problems(df: pd.DataFrame, *, min_step_ms: int = MIN_STEP_MS) -> list[str]:
    """Samples of one series at one timestamp, or closer than ``min_step_ms``: one reason each kind."""
    if df.empty or not _may_overlap(df, min_step_ms):
        return []
    out = []
    dup = df.duplicated(_KEY, keep=False)
    if dup.any():
        first = df[dup].iloc[0]
        out.append(
            f"duplicate samples: {int(dup.sum())} rows share (metric, vertex, subtask, ts_ms) with another, e.g. "
            f"{first['metric']} at ts_ms {int(first['ts_ms'])}; overlapping raw files would count them twice"
        )
    uniq = df.drop_duplicates(_KEY).sort_values(_KEY)
    gaps = uniq.groupby(["metric", "vertex", "subtask"], sort=False, observed=True)["ts_ms"].diff()
    close = gaps < min_step_ms
    if close.any():
        row = uniq[close.to_numpy()].iloc[0]
        out.append(
            f"overlapping samples: {int(close.sum())} sample(s) less than {min_step_ms} ms after the previous one "
            f"of their series, e.g. {row['metric']} at ts_ms {int(row['ts_ms'])}; two sources write the same series"
        )
    return out


def staleness_problem(newest: float, now: float, max_staleness_s: float) -> str | None:
    """The reason to hold when the newest sample (epoch s, ``-inf`` for none) is too old, else None."""
    if now - newest <= max_staleness_s:
        return None
    age = "no samples" if newest == float("-inf") else f"newest sample is {now - newest:.0f} s old"
    return f"stale data: {age} (limit {max_staleness_s:.0f} s)"


def label_rows(column: pd.Series, label: str) -> np.ndarray:
    """Rows of a label column (job, metric, vertex) equal to ``label``, as a plain boolean array.

    A categorical column compares its integer codes with the label's (one lookup, no string per
    row); a string column compares its strings, a missing label counting as unequal.
    """
    if isinstance(column.dtype, pd.CategoricalDtype):
        codes = column.array.codes  # the Categorical's own array, no copy
        try:
            return codes == column.dtype.categories.get_loc(label)
        except KeyError:
            return np.zeros(len(codes), dtype=bool)
    return (column == label).to_numpy(dtype=bool, na_value=False)


def _rows(df: pd.DataFrame, metric: str) -> np.ndarray:
    return label_rows(df["metric"], metric)


def _job_values(df: pd.DataFrame, metric: str) -> np.ndarray:
    """The metric's values summed per timestamp (a sample per timestamp, the usual case, is its own sum)."""
    rows = _rows(df, metric)
    ts, values = df["ts_ms"].to_numpy()[rows], df["value"].to_numpy(dtype="float64")[rows]
    if len(np.unique(ts)) == len(ts):
        return np.where(np.isnan(values), 0.0, values)
    return pd.Series(values).groupby(ts).sum().to_numpy()


def unit_problems(df: pd.DataFrame, config: Configuration, *, cpu_slack: float = CPU_SLACK) -> list[str]:
    """Values no job in ``config`` can show: a unit error upstream (reasons name metric, value and bound)."""
    out = []
    cpu = _job_values(df, "cpuLoad")
    cores = config.total_cpu
    if len(cpu) and float(np.median(cpu)) > cores * cpu_slack:
        out.append(
            f"cpuLoad median {float(np.median(cpu)):.3g} cores is above the {cores:g} cores reserved "
            f"(x{cpu_slack:g}); is CPU reported in percent instead of cores?"
        )
    heap = _job_values(df, "heapUsedMb")
    memory = config.total_memory_mb
    if len(heap) and float(np.median(heap)) > memory:
        out.append(
            f"heapUsedMb median {float(np.median(heap)):.3g} MB is above the {memory} MB configured; "
            "is heap reported in bytes instead of MB?"
        )
    for metric in _LATENCIES:
        lat = df["value"].to_numpy(dtype="float64")[_rows(df, metric)]
        lat = lat[~np.isnan(lat)]
        if len(lat) and float(np.median(lat)) < MIN_LATENCY_MS:
            out.append(
                f"{metric} median {float(np.median(lat)):.3g} ms is below {MIN_LATENCY_MS:g} ms; "
                "is latency reported in seconds instead of milliseconds?"
            )
            break  # one latency reason is enough: they share one unit
    return out


def config_problems(df: pd.DataFrame, config: Configuration) -> list[str]:
    """The configuration the newest samples report against ``config``, the one the cluster says is in
    force: metrics of another deployment (or a stale exporter) would size the job on the wrong numbers."""
    out = []
    for knob, metric in CONFIG_METRICS.items():
        rows = _rows(df, metric)
        if not rows.any():
            continue
        ts, values = df["ts_ms"].to_numpy()[rows], df["value"].to_numpy(dtype="float64")[rows]
        newest = float(pd.Series(values[ts == ts.max()]).max())
        expected = float(getattr(config, knob))
        if abs(newest - expected) > 1e-6 * max(1.0, abs(expected)):
            out.append(
                f"metrics disagree with the cluster: {metric} reports {newest:g} but the cluster's configuration has "
                f"{knob} {expected:g}; the metrics may come from another deployment or a stale exporter"
            )
    return out


def quality_problems(
    samples: pd.DataFrame,
    config: Configuration,
    now: float,
    *,
    max_staleness_s: float,
    frozen_after_s: float | None = None,
) -> list[str]:
    """Every reason to hold on ``samples`` (raw schema, one job, finite values) under ``config`` at ``now`` (epoch s).

    ``frozen_after_s`` None skips the frozen rule (sources whose values may legitimately be
    constant, e.g. synthetic test frames).
    """
    newest = float(samples["ts_ms"].max()) / 1000.0 if not samples.empty else float("-inf")
    problems = []
    stale = staleness_problem(newest, now, max_staleness_s)
    if stale:
        problems.append(stale)
    if samples.empty:
        return problems
    if frozen_after_s is not None and math.isfinite(newest):
        frozen = frozen_for_s(samples, newest)
        if frozen >= frozen_after_s:
            problems.append(
                f"frozen metrics: rate, throughput, backlog and latency identical for {frozen:.0f} s while samples "
                f"keep arriving (limit {frozen_after_s:.0f} s); the metrics pipeline is not refreshing"
            )
    problems += duplicate_problems(samples)
    problems += unit_problems(samples, config)
    problems += config_problems(samples, config)
    return problems
