"""Evaluate: turn raw samples of the last window into a :class:`JobState` a policy can read.

Input is a raw-schema frame (see ``metric_schema``). Rates are averaged over the window, lag is
the last value, lag growth the least-squares slope (records/s). Latency p95 is the mean of the
per-second p95 over the window's last minute (the policy reacts to what the job does now, not to
an hour-old average). Per-vertex metrics (records in and out, busy and backpressured time, DS2's
true processing rate) come from the vertex-level samples, in the order the source lists vertices
(topological for Flink and the twin). A state is marked not fresh when the newest sample is older than
``max_staleness_s``, and ``problems`` lists everything that makes it unfit to act on (missing
metrics, NaN, a job that is not running), so the guard can hold and say why. ``analysis`` says
where the window's time went (:mod:`flinktune.analysis`: bottleneck, stragglers, hot channel).
"""

from __future__ import annotations

import logging

import numpy as np
import pandas as pd

from flinktune.analysis.criticality import CriticalityAnalysis, analyse
from flinktune.config_space import Configuration
from flinktune.decision import JobState, VertexMetrics
from flinktune.metrics.quality import frozen_limit_s, quality_problems

log = logging.getLogger(__name__)

__all__ = ["REQUIRED_METRICS", "SOURCE_PREFIX", "evaluate", "minute_p95", "rate_series", "restarts", "vertex_metrics"]

#: Metrics a state cannot be evaluated without.
REQUIRED_METRICS = ("workloadRate", "numRecordsOutPerSecond", "pendingRecords", "latencyP95Ms", "jobRunning")
#: Flink names source vertices "Source: <name>"; their output is the job's throughput.
SOURCE_PREFIX = "Source"


def _job_metric(df: pd.DataFrame, metric: str) -> pd.Series:
    """Per-second series of a job-level metric (summed over subtasks when per subtask)."""
    sel = df[df["metric"] == metric]
    if sel.empty:
        return pd.Series(dtype="float64")
    return sel.groupby("ts_ms")["value"].sum().sort_index()


def _throughput(df: pd.DataFrame) -> pd.Series:
    sel = df[(df["metric"] == "numRecordsOutPerSecond") & df["vertex"].str.startswith(SOURCE_PREFIX)]
    if sel.empty:  # a source without the Flink prefix: take the first vertex seen
        sel = df[df["metric"] == "numRecordsOutPerSecond"]
        if sel.empty:
            return pd.Series(dtype="float64")
        sel = sel[sel["vertex"] == sel["vertex"].iloc[0]]
    return (
        sel[sel["subtask"] < 0].groupby("ts_ms")["value"].sum()
        if (sel["subtask"] < 0).any()
        else sel.groupby("ts_ms")["value"].sum()
    )


def _ratio(df: pd.DataFrame, metric: str) -> float:
    """Worst vertex's mean fraction of time spent in ``metric`` (ms per second / 1000)."""
    sel = df[df["metric"] == metric]
    if sel.empty:
        return float("nan")
    per_vertex = sel.groupby(["vertex", "subtask"])["value"].mean().groupby(level=0).max()
    return float(np.clip(per_vertex.max() / 1000.0, 0.0, 1.0))


def _slope(s: pd.Series) -> float:
    if len(s) < 2:
        return 0.0
    t = (s.index.to_numpy(dtype="float64") - s.index[0]) / 1000.0
    v = s.to_numpy(dtype="float64")
    if np.ptp(t) == 0:
        return 0.0
    return float(np.polyfit(t, v, 1)[0])


_VERTEX_METRICS = ("numRecordsInPerSecond", "numRecordsOutPerSecond", "busyTimeMsPerSecond", "backPressuredTimeMsPerSecond")


def minute_p95(p95: pd.Series, running: pd.Series) -> tuple[tuple[float, float], ...]:
    """Per minute: (minute start, s; the 95th percentile of its per-second p95, ms), ``inf`` for a minute
    the job was down for most of (an outage reports no latency, yet every record in it waits)."""

    def minute_of(s: pd.Series) -> np.ndarray:
        return (s.index.to_numpy(dtype="float64") // 60_000) * 60.0

    minutes = {float(t): float(v) for t, v in p95.groupby(minute_of(p95)).quantile(0.95).items()} if len(p95) else {}
    if len(running):
        for t, up in running.groupby(minute_of(running)).mean().items():
            if up < 0.5:
                minutes[float(t)] = float("inf")
    return tuple(sorted(minutes.items()))


def vertex_metrics(samples: pd.DataFrame, config: Configuration) -> tuple[VertexMetrics, ...]:
    """Per-vertex window summary (DS2 style) from raw samples; empty when there are none.

    Only seconds in which the vertex did work count (busy > 0): a second of downtime says
    nothing about how fast the vertex processes. Record rates are summed over subtasks per
    second; busy and backpressure take the busiest subtask (the operator autoscaler's MAX).
    """
    df = samples[samples["metric"].isin(_VERTEX_METRICS) & (samples["vertex"].astype(str) != "")]
    if df.empty:
        return ()
    overrides = config.vertex_overrides()
    # One pass: per (vertex, metric, second) the sum (record rates) and the max (time ratios).
    g = df.groupby(["vertex", "metric", "ts_ms"], sort=False, observed=True)["value"].agg(["sum", "max"])
    out: list[VertexMetrics] = []
    for name in pd.unique(df["vertex"].astype(str)):
        v = g.xs(name, level="vertex")

        def per_s(metric: str, how: str) -> pd.Series:
            return (
                v.xs(metric, level="metric")[how]  # noqa: B023 - per_s is called within this iteration only
                if metric in v.index.get_level_values("metric")  # noqa: B023
                else pd.Series(dtype="float64")
            )

        busy_s = per_s("busyTimeMsPerSecond", "max")
        working = busy_s.index[busy_s.to_numpy() > 0]

        def mean_over(s: pd.Series) -> float:
            s = s.reindex(working)  # noqa: B023 - mean_over is called within this iteration only
            return float(s.mean()) if len(s) and s.notna().any() else 0.0

        rin, rout = mean_over(per_s("numRecordsInPerSecond", "sum")), mean_over(per_s("numRecordsOutPerSecond", "sum"))
        busy = float(np.clip(mean_over(busy_s) / 1000.0, 0.0, 1.0))
        bp = float(np.clip(mean_over(per_s("backPressuredTimeMsPerSecond", "max")) / 1000.0, 0.0, 1.0))
        tpr = rin / busy if busy > 0 else float("inf")
        out.append(VertexMetrics(str(name), int(overrides.get(str(name), config.parallelism)), rin, rout, busy, bp, tpr))
    return tuple(out)


def restarts(df: pd.DataFrame) -> int:
    """Job restarts (failures) in ``df`` (raw schema): the increase of Flink's ``numRestarts`` counter."""
    counter = _job_metric(df, "numRestarts")
    return int(max(float(counter.iloc[-1] - counter.iloc[0]), 0.0)) if len(counter) > 1 else 0


def _analysis(df: pd.DataFrame, config: Configuration) -> CriticalityAnalysis | None:
    # Where the time went; an analysis that cannot be made must not stop the decision.
    try:
        return analyse(df, task_slots=config.task_slots)
    except (ValueError, KeyError, IndexError) as exc:
        log.warning("bottleneck analysis skipped: %s", exc)
        return None


def evaluate(
    job: str,
    samples: pd.DataFrame,
    config: Configuration,
    now: float,
    *,
    window_s: int,
    max_staleness_s: float = 120.0,
    frozen_after_s: float | None = None,
) -> JobState:
    """Summarise ``samples`` (raw schema, the last ``window_s`` seconds) into a :class:`JobState`.

    ``frozen_after_s``: when given, samples that keep arriving but whose live values (the offered
    rate, throughput, backlog and p95 latency) have not changed at all for that long are a
    problem too. Fresh timestamps over frozen values are stale data in disguise: a Flink
    JobManager whose metric fetcher stopped refreshing was seen to serve one set of values for
    minutes while the job ran on (docs/results/local-flink.md). Leave it None for sources whose
    values may legitimately be constant (synthetic test frames).
    """
    problems: list[str] = []
    df = samples[samples["job"] == job] if "job" in samples else samples
    present = set(df["metric"].unique()) if not df.empty else set()
    missing = [m for m in REQUIRED_METRICS if m not in present]
    if missing:
        problems.append(f"missing metrics {missing} in the last {window_s} s")
    values = df["value"].to_numpy(dtype="float64") if not df.empty else np.array([])
    if values.size and not np.isfinite(values).all():
        bad = df.loc[~np.isfinite(values), "metric"].unique().tolist()
        problems.append(f"non-finite samples in {bad[:5]}")
        df = df[np.isfinite(values)]

    newest = float(df["ts_ms"].max()) / 1000.0 if not df.empty else float("-inf")
    fresh = (now - newest) <= max_staleness_s
    # Staleness, frozen values, duplicate or overlapping samples, units out of range for `config`.
    frozen = frozen_limit_s(frozen_after_s, window_s) if frozen_after_s is not None else None
    problems += quality_problems(df, config, now, max_staleness_s=max_staleness_s, frozen_after_s=frozen)

    rate = _job_metric(df, "workloadRate")
    thr = _throughput(df)
    lag = _job_metric(df, "pendingRecords")
    p95 = _job_metric(df, "latencyP95Ms")
    running = _job_metric(df, "jobRunning")
    last_minute_ms = (newest - 60.0) * 1000.0
    is_running = bool(len(running)) and float(running.iloc[-1]) >= 0.5
    if len(running) and not is_running:
        problems.append("job is not running")

    def mean(s: pd.Series) -> float:
        return float(s.mean()) if len(s) else float("nan")

    return JobState(
        job=job,
        ts=now,
        config=config,
        running=is_running,
        input_rate=mean(rate),
        throughput=mean(thr),
        lag=float(lag.iloc[-1]) if len(lag) else float("nan"),
        lag_growth=_slope(lag),
        latency_p95_ms=mean(p95[p95.index >= last_minute_ms]) if len(p95) else float("nan"),
        cpu_used=mean(_job_metric(df, "cpuLoad")),
        memory_used_mb=mean(_job_metric(df, "heapUsedMb")),
        busy_ratio=_ratio(df, "busyTimeMsPerSecond"),
        backpressure_ratio=_ratio(df, "backPressuredTimeMsPerSecond"),
        window_s=window_s,
        fresh=fresh,
        problems=tuple(problems),
        vertices=vertex_metrics(df, config) if not df.empty else (),
        restarts=restarts(df),
        analysis=_analysis(df, config) if not df.empty else None,
        minute_p95=minute_p95(p95, running),
        data_age_s=round(now - newest, 3) if not df.empty else float("nan"),
    )


def rate_series(samples: pd.DataFrame, job: str) -> pd.Series:
    """The input-rate series (tz-aware UTC DatetimeIndex, rec/s) from raw samples."""
    s = _job_metric(samples[samples["job"] == job] if "job" in samples else samples, "workloadRate")
    s.index = pd.to_datetime(s.index, unit="ms", utc=True)
    s.name = "rate"
    return s
