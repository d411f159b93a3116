"""PySpark transform of raw metric samples into the curated ``features_1m`` dataset.

Use :func:`read_raw` to load one job's raw samples (partition discovery on ``job/date/hour``,
pruned by job and date) and :func:`features_1m` to turn them into one row per job and minute
(columns :data:`FEATURE_COLUMNS`, see docs/CONTRACTS.md). Aggregation choices, in two steps:

1. Per second (``sec = ts_ms // 1000``), in one aggregation over (job, second, vertex): job-level
   metrics (mean when a second has several samples) side by side with the subtask ones. Subtask metrics are combined per vertex (records in: sum over subtasks;
   busy and back-pressured time: mean over subtasks / 1000, i.e. the vertex's utilisation), then
   over vertices: ``busy_ratio`` and ``backpressure_ratio`` are the max over vertices (the
   bottleneck's), ``throughput`` the max over vertices of records in per second (the source-side
   rate; the raw schema carries no topology, and a non-amplifying job reads most at its first
   reading vertex). Ratios are clipped to [0, 1]: Flink's ms-per-second counters overshoot a little.
2. Per minute (``window_start`` = the minute, UTC): means for rates and resource use
   (``input_rate``, ``throughput``, ``cpu_used``, ``memory_used_mb``, the ratios) and for ``lag``;
   ``lag_growth`` = (last - first pendingRecords) / seconds between them (records/s; null with one
   sample); latency quantiles: the **max** of the per-second quantiles, an upper bound of the
   minute's true quantile (if every second has at most 5 % of records above its p95, so does the
   minute above the largest p95), so a latency goal checked on curated data is never missed;
   ``restarts`` = increase of the ``numRestarts`` counter, counting a drop as a reset (Prometheus
   ``increase`` semantics, the increase after a reset is the new value) and attributing each
   increase to the minute of the later sample; ``up_fraction`` = mean of ``jobRunning``;
   levels (``taskmanagers``, ``task_slots_total``, ``checkpoint_duration_ms``) and the
   configuration in force: the last value in the minute, the configuration carried forward over
   minutes without a sample; ``samples`` = distinct seconds with any sample.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from flinktune.metric_schema import CONFIG_METRICS, METRICS, RAW_COLUMNS

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

__all__ = ["FEATURE_COLUMNS", "INT_COLUMNS", "NoRawDataError", "read_raw", "features_1m"]

FEATURE_COLUMNS: tuple[str, ...] = (
    "job", "window_start", "input_rate", "throughput", "lag", "lag_growth", "latency_p50_ms",
    "latency_p95_ms", "latency_p99_ms", "cpu_used", "memory_used_mb", "busy_ratio",
    "backpressure_ratio", "taskmanagers", "task_slots_total", "parallelism", "task_slots", "cpu",
    "memory_mb", "checkpoint_interval_s", "checkpoint_duration_ms", "restarts", "up_fraction", "samples",
)  # fmt: skip
#: Integer-valued feature columns (nullable int64); the others but job/window_start are doubles.
INT_COLUMNS: tuple[str, ...] = (
    "taskmanagers", "task_slots_total", "parallelism", "task_slots", "memory_mb",
    "checkpoint_interval_s", "restarts", "samples",
)  # fmt: skip

_JOB_METRICS = sorted(m for m, info in METRICS.items() if info.level == "job")
_MEANS = {"input_rate": "workloadRate", "lag": "pendingRecords", "cpu_used": "cpuLoad", "memory_used_mb": "heapUsedMb", "up_fraction": "jobRunning"}
_MAXES = {"latency_p50_ms": "latencyP50Ms", "latency_p95_ms": "latencyP95Ms", "latency_p99_ms": "latencyP99Ms"}
_LASTS = {"taskmanagers": "taskManagers", "task_slots_total": "taskSlotsTotal", "checkpoint_duration_ms": "lastCheckpointDurationMs"}


class NoRawDataError(LookupError):
    """No raw samples for the job and time range; the message names job, range and folder."""


def read_raw(spark: "SparkSession", raw_dir: str | Path, job: str, start_ms: int | None = None, end_ms: int | None = None) -> "DataFrame":
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
    df = spark.read.schema(schema).option("basePath", str(raw_dir)).parquet(str(job_dir))

    def day(ms: int) -> str:
        return dt.datetime.fromtimestamp(ms / 1000, tz=dt.timezone.utc).strftime("%Y-%m-%d")

    if start_ms is not None:
        df = df.filter((F.col("date") >= day(start_ms)) & (F.col("ts_ms") >= start_ms))
    if end_ms is not None:
        df = df.filter((F.col("date") <= day(end_ms - 1)) & (F.col("ts_ms") < end_ms))
    return df.select(*RAW_COLUMNS)


def _last_in_group(value: str, order: str = "sec"):  # noqa: ANN202 - returns a pyspark Column
    """Aggregate: the value at the latest ``order`` among non-null values (null if none)."""
    from pyspark.sql import functions as F

    return F.max(F.when(F.col(value).isNotNull(), F.struct(F.col(order), F.col(value))))[value]


def _first_in_group(value: str, order: str = "sec"):  # noqa: ANN202
    from pyspark.sql import functions as F

    return F.min(F.when(F.col(value).isNotNull(), F.struct(F.col(order), F.col(value))))[value]


def features_1m(raw: "DataFrame") -> "DataFrame":
    """One row per job and minute from raw samples (any number of jobs), sorted by job and minute."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    s = raw.withColumn("sec", F.floor(F.col("ts_ms") / 1000))

    # One scan: a single aggregation per (job, second, vertex) computes the job-level metrics (on
    # the vertex "" rows) and the per-vertex subtask combinations side by side; the second level
    # then takes the job metrics' only value (max) and the bottleneck over vertices.
    m, v = F.col("metric"), F.col("value")
    per_vertex = s.groupBy("job", "sec", "vertex").agg(
        *[F.avg(F.when(m == name, v)).alias(name) for name in _JOB_METRICS],
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
    per_sec = per_sec.withColumn("minute", F.floor(F.col("sec") / 60))

    # Counter increase per sample, attributed to the later sample's minute; a drop is a reset.
    by_time = Window.partitionBy("job").orderBy("sec")
    restarts = (
        per_sec.filter(F.col("numRestarts").isNotNull())
        .select("job", "sec", "minute", F.col("numRestarts").alias("v"))
        .withColumn("prev", F.lag("v").over(by_time))
        .withColumn("inc", F.when(F.col("prev").isNull(), 0.0).when(F.col("v") >= F.col("prev"), F.col("v") - F.col("prev")).otherwise(F.col("v")))
        .groupBy("job", "minute")
        .agg(F.sum("inc").alias("restarts"))
    )

    aggs = [F.avg(metric).alias(name) for name, metric in _MEANS.items()]
    aggs += [F.max(metric).alias(name) for name, metric in _MAXES.items()]
    aggs += [_last_in_group(metric).alias(name) for name, metric in _LASTS.items()]
    aggs += [_last_in_group(metric).alias(knob) for knob, metric in CONFIG_METRICS.items()]
    aggs += [
        F.avg("throughput_s").alias("throughput"),
        F.avg("busy_s").alias("busy_ratio"),
        F.avg("bp_s").alias("backpressure_ratio"),
        _first_in_group("pendingRecords").alias("lag_first"),
        _last_in_group("pendingRecords").alias("lag_last"),
        F.min(F.when(F.col("pendingRecords").isNotNull(), F.col("sec"))).alias("lag_t0"),
        F.max(F.when(F.col("pendingRecords").isNotNull(), F.col("sec"))).alias("lag_t1"),
        F.count(F.lit(1)).alias("samples"),
    ]
    minute = per_sec.groupBy("job", "minute").agg(*aggs).join(restarts, ["job", "minute"], "left")

    # The configuration in force persists until changed: carry it over minutes without a sample.
    carried = Window.partitionBy("job").orderBy("minute").rowsBetween(Window.unboundedPreceding, Window.currentRow)
    for knob in CONFIG_METRICS:
        minute = minute.withColumn(knob, F.last(knob, ignorenulls=True).over(carried))

    dt_s = F.col("lag_t1") - F.col("lag_t0")
    minute = minute.withColumn("lag_growth", F.when(dt_s > 0, (F.col("lag_last") - F.col("lag_first")) / dt_s))
    minute = minute.withColumn("restarts", F.coalesce(F.col("restarts"), F.lit(0.0)))
    minute = minute.withColumn("window_start", F.timestamp_seconds(F.col("minute") * 60))
    out = []
    for c in FEATURE_COLUMNS:
        col = F.col(c)
        if c in INT_COLUMNS:
            col = F.round(col).cast("long")
        elif c not in ("job", "window_start"):
            col = col.cast("double")
        out.append(col.alias(c))
    return minute.select(*out).orderBy("job", "window_start")
