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
from flinktune.analysis.windows import has_vertex
from flinktune.config_space import Configuration
from flinktune.decision import JobState, VertexMetrics
from flinktune.metrics.quality import frozen_limit_s, label_rows, quality_problems

log = logging.getLogger(__name__)

__all__ = ["REQUIRED_METRICS", "SOURCE_PREFIX", "evaluate", "minute_p95", "rate_series", "restarts", "vertex_metrics"]

#: Metrics a state cannot be evaluated without.
REQUIRED_METRICS = ("workloadRate", "numRecordsOutPerSecond", "pendingRecords", "latencyP95Ms", "jobRunning")
#: Flink names source vertices "Source: <name>"; their output is the job's throughput.
SOURCE_PREFIX = "Source"


#: The label columns of the raw schema.
_LABELS = ("job", "metric", "vertex")


def _coded(samples: pd.DataFrame) -> pd.DataFrame:
    """``samples`` with its label columns as categoricals (sorted categories, so any sort is unchanged).

    Every comparison and group-by below then works on integer codes instead of one Python string
    per row, which on a decision's window is most of the time evaluation takes.
    """
    cols = {
        c: pd.Categorical(samples[c]) for c in _LABELS if c in samples and not isinstance(samples[c].dtype, pd.CategoricalDtype)
    }
    return samples.assign(**cols) if cols else samples


def _per_second(ts: np.ndarray, values: np.ndarray) -> pd.Series:
    """``values`` summed per timestamp (``ts_ms``), in time order: a group-by sum, without one when
    every second holds one sample (the usual case), where that sum is the value itself (NaN: 0)."""
    order = np.argsort(ts, kind="stable")
    ts, values = ts[order], values[order]
    if len(ts) > 1 and not bool((np.diff(ts) > 0).all()):
        return pd.Series(values, index=pd.Index(ts, name="ts_ms"), name="value").groupby(level=0).sum()
    return pd.Series(np.where(np.isnan(values), 0.0, values), index=pd.Index(ts, name="ts_ms"), name="value")


def _job_metric(df: pd.DataFrame, metric: str) -> pd.Series:
    """Per-second series of a job-level metric (summed over subtasks when per subtask)."""
    sel = label_rows(df["metric"], metric)
    if not sel.any():
        return pd.Series(dtype="float64")
    return _per_second(df["ts_ms"].to_numpy()[sel], df["value"].to_numpy(dtype="float64")[sel])


def _throughput(df: pd.DataFrame) -> pd.Series:
    out = label_rows(df["metric"], "numRecordsOutPerSecond")
    if not out.any():
        return pd.Series(dtype="float64")
    vertex = pd.Series(pd.Categorical(df["vertex"]))
    codes = vertex.cat.codes.to_numpy()
    source = np.array([str(v).startswith(SOURCE_PREFIX) for v in vertex.cat.categories] + [False])
    sel = out & source[codes]  # code -1 (no vertex) reads the trailing False
    if not sel.any():  # a source without the Flink prefix: take the first vertex seen
        sel = out & (codes == codes[np.flatnonzero(out)[0]])
    sub = df["subtask"].to_numpy()
    if (sub[sel] < 0).any():
        sel &= sub < 0
    return _per_second(df["ts_ms"].to_numpy()[sel], df["value"].to_numpy(dtype="float64")[sel])


def _ratio(df: pd.DataFrame, metric: str) -> float:
    """Worst vertex's mean fraction of time spent in ``metric`` (ms per second / 1000)."""
    rows = label_rows(df["metric"], metric)
    if not rows.any():
        return float("nan")
    # The highest mean over (vertex, subtask) series: one group-by on one integer key per series
    # (rows without a vertex belong to none, as in a group-by on the labels).
    vertex = pd.factorize(df["vertex"])[0][rows]
    rows[rows] = vertex >= 0
    vertex = vertex[vertex >= 0]
    subtask = pd.factorize(df["subtask"].to_numpy()[rows])[0]
    series = vertex.astype(np.int64) * (int(subtask.max(initial=0)) + 1) + subtask
    means = pd.Series(df["value"].to_numpy(dtype="float64")[rows]).groupby(series).mean()
    return float(np.clip(means.max() / 1000.0, 0.0, 1.0))


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


def _unique_keys(*codes: np.ndarray) -> bool:
    """True when no two rows share all of ``codes`` (integer codes, one array per key)."""
    order = np.lexsort(codes[::-1])
    same = np.ones(max(len(order) - 1, 0), dtype=bool)
    for c in codes:
        same &= c[order][1:] == c[order][:-1]
    return not bool(same.any())


def _mean_at(ts: np.ndarray, values: np.ndarray, at: np.ndarray) -> float:
    """Mean of the series (``ts`` -> ``values``) at the timestamps ``at``, missing ones skipped
    (pandas' reindex-then-mean, summed the same way); 0 when none is there."""
    if not len(at) or not len(ts):
        return 0.0
    if len(ts) == len(at) and bool((ts == at).all()):
        picked = values.copy()
    else:
        idx = pd.Index(ts).get_indexer(at)
        picked = np.where(idx >= 0, values[idx], np.nan)
    missing = np.isnan(picked)
    if missing.all():
        return 0.0
    picked[missing] = 0.0
    return float(picked.sum() / (~missing).sum())


def vertex_metrics(samples: pd.DataFrame, config: Configuration) -> tuple[VertexMetrics, ...]:
    """Per-vertex window summary (DS2 style) from raw samples; empty when there are none.

    Only seconds in which the vertex did work count (busy > 0): a second of downtime says
    nothing about how fast the vertex processes. Record rates are summed over subtasks per
    second; busy and backpressure take the busiest subtask (the operator autoscaler's MAX).
    """
    df = samples[samples["metric"].isin(_VERTEX_METRICS).to_numpy() & has_vertex(samples)]
    if df.empty:
        return ()
    overrides = config.vertex_overrides()
    # Per (vertex, metric, second) the sum (record rates) and the max (time ratios) as plain arrays,
    # rows in the order the seconds first appear; a sample per key (vertex-level samples) is both.
    vertex, metric, ts = df["vertex"], df["metric"], df["ts_ms"].to_numpy()
    values = df["value"].to_numpy(dtype="float64")
    v_code, names = pd.factorize(vertex, use_na_sentinel=False)
    m_code, metrics = pd.factorize(metric)
    if _unique_keys(v_code, m_code, ts):
        sums, maxes = np.where(np.isnan(values), 0.0, values), values
    else:
        g = df.groupby(["vertex", "metric", "ts_ms"], sort=False, observed=True)["value"].agg(["sum", "max"])
        v_code, names = pd.factorize(g.index.get_level_values("vertex"), use_na_sentinel=False)
        m_code, metrics = pd.factorize(g.index.get_level_values("metric"))
        ts = g.index.get_level_values("ts_ms").to_numpy()
        sums, maxes = g["sum"].to_numpy(dtype="float64"), g["max"].to_numpy(dtype="float64")
    m_of = {str(m): k for k, m in enumerate(metrics)}
    out: list[VertexMetrics] = []
    for k, name in enumerate(names):  # in the order vertices first appear
        mine = v_code == k

        def per_s(metric: str, agg: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
            rows = mine & (m_code == m_of.get(metric, -2))  # noqa: B023 - per_s is called within this iteration only
            return ts[rows], agg[rows]

        busy_ts, busy_ms = per_s("busyTimeMsPerSecond", maxes)
        working = busy_ts[busy_ms > 0]
        rin = _mean_at(*per_s("numRecordsInPerSecond", sums), working)
        rout = _mean_at(*per_s("numRecordsOutPerSecond", sums), working)
        busy = float(np.clip(_mean_at(busy_ts, busy_ms, working) / 1000.0, 0.0, 1.0))
        bp = float(np.clip(_mean_at(*per_s("backPressuredTimeMsPerSecond", maxes), working) / 1000.0, 0.0, 1.0))
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
    samples = _coded(samples)
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
