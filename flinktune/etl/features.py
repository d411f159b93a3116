"""PySpark transform of raw metric samples into the curated ``features_10s`` and ``features_1m`` datasets.

Use :func:`read_raw` to load one job's raw samples (partition discovery on ``job/date/hour``,
pruned by job and date), then :func:`features_10s` / :func:`features_1m` for one grain, or, for
both from one scan of the raw data, :func:`ten_second_parts` (persist it) and
:func:`features_from_parts` per grain (what ``jobs.etl_features`` does). Both grains have the
columns :data:`FEATURE_COLUMNS` (one row per job and window, see docs/CONTRACTS.md). Three steps:

1. Per second (``sec = ts_ms // 1000``), in one aggregation over (job, second, vertex): job-level
   metrics (mean when a second has several samples; a counter takes its latest sample, since a
   mean across a reset means nothing) side by side with the subtask ones. Subtask metrics are
   combined per vertex (records in: sum over subtasks; busy and back-pressured time: mean over
   subtasks / 1000, i.e. the vertex's utilisation), then over vertices: ``busy_ratio`` and
   ``backpressure_ratio`` are the max over vertices (the bottleneck's), ``throughput`` the max
   over vertices of records in per second (the source-side rate; the raw schema carries no
   topology, and a non-amplifying job reads most at its first reading vertex). Ratios are clipped
   to [0, 1]: Flink's ms-per-second counters overshoot a little. The ``numRestarts`` counter's
   increase per second: the difference to the previous second with a sample, a fall counting as
   a reset whose increase is the new value (Prometheus ``increase``). The raw contract's
   ``counter.counters_never_decrease`` rule has already stopped any batch with a fall that is no
   reset (new value above half the previous one), so every fall seen here is a reset.
2. Per 10 s (:func:`ten_second_parts`): mergeable partial aggregates per job and 10-s bucket.
3. Per grain (:func:`features_from_parts`; 10 s directly, 1 min by merging six buckets), each
   column by one rule, all of which merge exactly, so the 1-min rows equal those computed from the
   seconds directly (up to float rounding of sums):

   ===================================================  ============================================
   columns                                              rule (partials kept per 10 s)
   ===================================================  ============================================
   input_rate, throughput, lag, cpu_used,               mean over seconds with a value
   memory_used_mb, busy_ratio, backpressure_ratio,      (sum and count)
   up_fraction (mean of ``jobRunning``)
   latency_p50_ms, latency_p95_ms, latency_p99_ms       max of the per-second quantiles (max)
   taskmanagers, task_slots_total,                      last value in the window ((second, value)
   checkpoint_duration_ms                               of the latest second with a value)
   parallelism, task_slots, cpu, memory_mb,             last value in the window, carried forward
   checkpoint_interval_s (the configuration in force)   over windows without a sample
   lag_growth                                           (last - first ``pendingRecords``) / seconds
                                                        between them; null with one sample (first
                                                        and last (second, value))
   restarts                                             sum of the counter's increases, each in the
                                                        window of its later sample (sum)
   samples                                              distinct seconds with any sample (count)
   ===================================================  ============================================

   Latency quantiles do not compose (no exact minute quantile from per-second quantiles), so both
   grains keep the same upper bound: if every second has at most 5 % of its records above its
   p95, so does the window above the largest p95. A latency goal checked on curated data is thus
   never missed, and the max of 10-s maxima is exactly the max over the minute's seconds.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import TYPE_CHECKING

from flinktune.metrics.schema import CONFIG_METRICS, COUNTER_METRICS, METRICS, RAW_COLUMNS

log = logging.getLogger(__name__)

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

__all__ = [
    "BUCKET_S",
    "FEATURE_COLUMNS",
    "GRAINS",
    "INT_COLUMNS",
    "NoRawDataError",
    "features_1m",
    "features_10s",
    "features_from_parts",
    "read_raw",
    "ten_second_parts",
]

FEATURE_COLUMNS: tuple[str, ...] = (
    "job",
    "window_start",
    "input_rate",
    "throughput",
    "lag",
    "lag_growth",
    "latency_p50_ms",
    "latency_p95_ms",
    "latency_p99_ms",
    "cpu_used",
    "memory_used_mb",
    "busy_ratio",
    "backpressure_ratio",
    "taskmanagers",
    "task_slots_total",
    "parallelism",
    "task_slots",
    "cpu",
    "memory_mb",
    "checkpoint_interval_s",
    "checkpoint_duration_ms",
    "restarts",
    "up_fraction",
    "samples",
)
#: Integer-valued feature columns (nullable int64); the others but job/window_start are doubles.
INT_COLUMNS: tuple[str, ...] = (
    "taskmanagers",
    "task_slots_total",
    "parallelism",
    "task_slots",
    "memory_mb",
    "checkpoint_interval_s",
    "restarts",
    "samples",
)

#: Curated dataset -> window width in seconds. Both are written by ``jobs.etl_features``.
GRAINS: dict[str, int] = {"features_10s": 10, "features_1m": 60}
#: Width of the partial aggregates every grain is merged from (each grain is a multiple of it).
BUCKET_S = 10

_JOB_METRICS = sorted(m for m, info in METRICS.items() if info.level == "job")
# feature column -> per-second column it summarises
_MEANS = {
    "input_rate": "workloadRate",
    "lag": "pendingRecords",
    "cpu_used": "cpuLoad",
    "memory_used_mb": "heapUsedMb",
    "up_fraction": "jobRunning",
    "throughput": "throughput_s",
    "busy_ratio": "busy_s",
    "backpressure_ratio": "bp_s",
}
_MAXES = {"latency_p50_ms": "latencyP50Ms", "latency_p95_ms": "latencyP95Ms", "latency_p99_ms": "latencyP99Ms"}
_LASTS = {
    "taskmanagers": "taskManagers",
    "task_slots_total": "taskSlotsTotal",
    "checkpoint_duration_ms": "lastCheckpointDurationMs",
}
_LASTS.update(CONFIG_METRICS)


class NoRawDataError(LookupError):
    """No raw samples for the job and time range; the message names job, range and folder."""


def read_raw(
    spark: SparkSession, raw_dir: str | Path, job: str, start_ms: int | None = None, end_ms: int | None = None
) -> DataFrame:
    """Raw samples of ``job`` in ``[start_ms, end_ms)`` with the raw schema (``RAW_COLUMNS``).

    Reads ``raw_dir/job=<job>`` with an explicit schema (a job named ``"123"`` stays a string) and
    prunes ``date`` partitions outside the range.
    """
    import datetime as dt

    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    job_dir = Path(raw_dir) / f"job={job}"
    if not job_dir.is_dir():
        raise NoRawDataError(f"no raw metrics for job {job!r}: folder {job_dir} does not exist")
    schema = T.StructType(
        [
            T.StructField("metric", T.StringType()),
            T.StructField("vertex", T.StringType()),
            T.StructField("subtask", T.IntegerType()),
            T.StructField("ts_ms", T.LongType()),
            T.StructField("value", T.DoubleType()),
            T.StructField("job", T.StringType()),
            T.StructField("date", T.StringType()),
            T.StructField("hour", T.IntegerType()),
        ]
    )
    # Read below the job folder: ``job`` is then the files' own column (null when they carry none,
    # as Lake.write_raw writes them), not the folder's name, so rows of another job are seen.
    df = spark.read.schema(schema).parquet(str(job_dir))

    def day(ms: int) -> str:
        return dt.datetime.fromtimestamp(ms / 1000, tz=dt.UTC).strftime("%Y-%m-%d")

    if start_ms is not None:
        df = df.filter((F.col("date") >= day(start_ms)) & (F.col("ts_ms") >= start_ms))
    if end_ms is not None:
        df = df.filter((F.col("date") <= day(end_ms - 1)) & (F.col("ts_ms") < end_ms))
    foreign = F.col("job").isNotNull() & (F.col("job") != job)
    others = [r["job"] for r in df.filter(foreign).select("job").distinct().limit(3).collect()]
    if others:
        # Curating them as this job would mix two jobs' load into one history: they are left out.
        log.warning("raw metrics of job %r under %s: rows of job(s) %s in its partition dropped", job, job_dir, sorted(others))
        df = df.filter(~foreign)
    return df.withColumn("job", F.lit(job)).select(*RAW_COLUMNS)


def _per_second(raw: DataFrame) -> DataFrame:
    """(job, sec) rows: every job metric, ``throughput_s``, ``busy_s``, ``bp_s`` and ``restarts_inc``."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    s = raw.withColumn("sec", F.floor(F.col("ts_ms") / 1000))
    # One scan: a single aggregation per (job, second, vertex) computes the job-level metrics (on
    # the vertex "" rows) and the per-vertex subtask combinations side by side; the second level
    # then takes the job metrics' only value (max) and the bottleneck over vertices.
    m, v = F.col("metric"), F.col("value")

    def job_metric(name: str):
        if name in COUNTER_METRICS:  # the latest sample (max_by keeps the hash aggregate: fixed-width buffer)
            return F.max_by(F.when(m == name, v), F.when(m == name, F.col("ts_ms"))).alias(name)
        return F.avg(F.when(m == name, v)).alias(name)

    per_vertex = s.groupBy("job", "sec", "vertex").agg(
        *[job_metric(name) for name in _JOB_METRICS],
        F.sum(F.when(m == "numRecordsInPerSecond", v)).alias("records_in"),
        (F.avg(F.when(m == "busyTimeMsPerSecond", v)) / 1000.0).alias("busy"),
        (F.avg(F.when(m == "backPressuredTimeMsPerSecond", v)) / 1000.0).alias("bp"),
    )
    per_sec = per_vertex.groupBy("job", "sec").agg(
        *[F.max(name).alias(name) for name in _JOB_METRICS],
        F.max("records_in").alias("throughput_s"),
        F.least(F.lit(1.0), F.max("busy")).alias("busy_s"),
        F.least(F.lit(1.0), F.max("bp")).alias("bp_s"),
    )
    # Counter increase per second with a sample, against the previous such second; a fall is a reset.
    before = Window.partitionBy("job").orderBy("sec").rowsBetween(Window.unboundedPreceding, -1)
    cur, prev = F.col("numRestarts"), F.last("numRestarts", ignorenulls=True).over(before)
    inc = F.when(cur.isNull() | prev.isNull(), 0.0).when(cur >= prev, cur - prev).otherwise(cur)
    return per_sec.withColumn("restarts_inc", inc)


def _first_last(value: str, order: str = "sec"):
    """Aggregates: (order, value) structs of the earliest and the latest non-null ``value``."""
    from pyspark.sql import functions as F

    pair = F.when(F.col(value).isNotNull(), F.struct(F.col(order).alias("t"), F.col(value).alias("v")))
    return F.min(pair), F.max(pair)


def ten_second_parts(raw: DataFrame) -> DataFrame:
    """Mergeable partial aggregates per job and 10-s bucket (``bucket`` = epoch seconds // 10).

    Columns: ``<col>__sum`` / ``<col>__n`` for means, the quantile maxima, ``<col>__last``
    ((second, value) structs) for levels and the configuration, ``lag__first`` / ``lag__last``,
    ``restarts`` and ``samples``. Small (one row per 10 s and job): persist it when several
    grains are built from one scan.
    """
    from pyspark.sql import functions as F

    per_sec = _per_second(raw).withColumn("bucket", F.floor(F.col("sec") / BUCKET_S))
    aggs = []
    for name, col in _MEANS.items():
        aggs += [F.sum(col).alias(f"{name}__sum"), F.count(col).alias(f"{name}__n")]
    aggs += [F.max(col).alias(name) for name, col in _MAXES.items()]
    aggs += [_first_last(col)[1].alias(f"{name}__last") for name, col in _LASTS.items()]
    first, last = _first_last("pendingRecords")
    aggs += [first.alias("lag__first"), last.alias("lag__last")]
    aggs += [F.sum("restarts_inc").alias("restarts"), F.count(F.lit(1)).alias("samples")]
    return per_sec.groupBy("job", "bucket").agg(*aggs)


def _merge(parts: DataFrame, width_s: int) -> DataFrame:
    """Partials of ``width_s``-second windows (column ``window``) from 10-s ones, rule by rule."""
    from pyspark.sql import functions as F

    if width_s % BUCKET_S or width_s <= 0:
        raise ValueError(f"grain {width_s} s must be a positive multiple of the {BUCKET_S}-s bucket")
    window = F.floor(F.col("bucket") * BUCKET_S / width_s).alias("window")
    if width_s == BUCKET_S:
        return parts.select(F.col("bucket").alias("window"), *[c for c in parts.columns if c != "bucket"])
    aggs = []
    for name in _MEANS:
        aggs += [F.sum(f"{name}__sum").alias(f"{name}__sum"), F.sum(f"{name}__n").alias(f"{name}__n")]
    aggs += [F.max(name).alias(name) for name in _MAXES]
    aggs += [F.max(f"{name}__last").alias(f"{name}__last") for name in _LASTS]
    aggs += [F.min("lag__first").alias("lag__first"), F.max("lag__last").alias("lag__last")]
    aggs += [F.sum("restarts").alias("restarts"), F.sum("samples").alias("samples")]
    return parts.groupBy("job", window).agg(*aggs)


def features_from_parts(parts: DataFrame, width_s: int) -> DataFrame:
    """One row per job and ``width_s``-second window (a multiple of 10) from :func:`ten_second_parts`,
    columns :data:`FEATURE_COLUMNS`, sorted by job and window."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    w = _merge(parts, width_s)
    for name in _MEANS:
        w = w.withColumn(name, F.when(F.col(f"{name}__n") > 0, F.col(f"{name}__sum") / F.col(f"{name}__n")))
    for name in _LASTS:
        w = w.withColumn(name, F.col(f"{name}__last").getField("v"))
    # The configuration in force persists until changed: carry it over windows without a sample.
    carried = Window.partitionBy("job").orderBy("window").rowsBetween(Window.unboundedPreceding, Window.currentRow)
    for knob in CONFIG_METRICS:
        w = w.withColumn(knob, F.last(knob, ignorenulls=True).over(carried))
    first, last = F.col("lag__first"), F.col("lag__last")
    dt_s = last.getField("t") - first.getField("t")
    w = w.withColumn("lag_growth", F.when(dt_s > 0, (last.getField("v") - first.getField("v")) / dt_s))
    w = w.withColumn("restarts", F.coalesce(F.col("restarts"), F.lit(0.0)))
    w = w.withColumn("window_start", F.timestamp_seconds(F.col("window") * width_s))
    out = []
    for c in FEATURE_COLUMNS:
        col = F.col(c)
        if c in INT_COLUMNS:
            col = F.round(col).cast("long")
        elif c not in ("job", "window_start"):
            col = col.cast("double")
        out.append(col.alias(c))
    return w.select(*out).orderBy("job", "window_start")


def features_10s(raw: DataFrame) -> DataFrame:
    """One row per job and 10 s from raw samples (any number of jobs), sorted by job and window."""
    return features_from_parts(ten_second_parts(raw), GRAINS["features_10s"])


def features_1m(raw: DataFrame) -> DataFrame:
    """One row per job and minute from raw samples (any number of jobs), sorted by job and minute."""
    return features_from_parts(ten_second_parts(raw), GRAINS["features_1m"])
