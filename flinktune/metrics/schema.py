"""The raw metric schema every source writes to the lake (Prometheus, Flink REST, the twin).

One row per sample, long format, as a Prometheus range query yields it::

    job: str         the Flink job (FlinkDeployment) name
    metric: str      one of METRICS (Flink's own names where Flink has one)
    vertex: str      the job vertex ("" for job- or cluster-level metrics)
    subtask: int32   subtask index (-1 when the sample is not per subtask)
    ts_ms: int64     sample time, epoch milliseconds UTC
    value: float64   the sample

Raw files are parquet, partitioned ``job=<job>/date=<YYYY-MM-DD>/hour=<HH>`` under
``<lake>/raw/metrics``. Use :func:`empty_frame` / :func:`validate_frame` when producing samples.
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

__all__ = [
    "CONFIG_METRICS",
    "COUNTER_METRICS",
    "METRICS",
    "PROFILING_COLUMNS",
    "PROFILING_DTYPES",
    "RAW_COLUMNS",
    "RAW_DTYPES",
    "MetricInfo",
    "SchemaError",
    "empty_frame",
    "validate_frame",
]

RAW_COLUMNS: tuple[str, ...] = ("job", "metric", "vertex", "subtask", "ts_ms", "value")
RAW_DTYPES: dict[str, str] = {
    "job": "string",
    "metric": "string",
    "vertex": "string",
    "subtask": "int32",
    "ts_ms": "int64",
    "value": "float64",
}


@dataclass(frozen=True)
class MetricInfo:
    """What one metric means: unit, level (job, vertex, subtask), the Prometheus name it maps from,
    and whether it is a cumulative counter (only grows, back to ~0 when the job is redeployed)."""

    unit: str
    level: str
    description: str
    prometheus: str
    counter: bool = False


METRICS: dict[str, MetricInfo] = {
    "workloadRate": MetricInfo("rec/s", "job", "records offered by producers (the input rate)", "kafka_topic_produce_rate"),
    "numRecordsInPerSecond": MetricInfo(
        "rec/s", "subtask", "records read per second", "flink_taskmanager_job_task_numRecordsInPerSecond"
    ),
    "numRecordsOutPerSecond": MetricInfo(
        "rec/s", "subtask", "records emitted per second", "flink_taskmanager_job_task_numRecordsOutPerSecond"
    ),
    "busyTimeMsPerSecond": MetricInfo(
        "ms/s", "subtask", "time busy processing per second", "flink_taskmanager_job_task_busyTimeMsPerSecond"
    ),
    "backPressuredTimeMsPerSecond": MetricInfo(
        "ms/s", "subtask", "time back-pressured per second", "flink_taskmanager_job_task_backPressuredTimeMsPerSecond"
    ),
    "idleTimeMsPerSecond": MetricInfo(
        "ms/s", "subtask", "time idle per second", "flink_taskmanager_job_task_idleTimeMsPerSecond"
    ),
    "pendingRecords": MetricInfo(
        "records", "job", "consumer lag: records offered but not yet read", "flink_taskmanager_job_task_operator_pendingRecords"
    ),
    "latencyP50Ms": MetricInfo("ms", "job", "end-to-end latency, median", "flink_taskmanager_job_task_operator_latency_p50"),
    "latencyP95Ms": MetricInfo(
        "ms", "job", "end-to-end latency, 95th percentile", "flink_taskmanager_job_task_operator_latency_p95"
    ),
    "latencyP99Ms": MetricInfo(
        "ms", "job", "end-to-end latency, 99th percentile", "flink_taskmanager_job_task_operator_latency_p99"
    ),
    "cpuLoad": MetricInfo("cores", "job", "CPU cores used by the TaskManagers", "flink_taskmanager_Status_JVM_CPU_Load"),
    "heapUsedMb": MetricInfo("MB", "job", "JVM heap used across TaskManagers", "flink_taskmanager_Status_JVM_Memory_Heap_Used"),
    "lastCheckpointDurationMs": MetricInfo(
        "ms", "job", "duration of the last completed checkpoint", "flink_jobmanager_job_lastCheckpointDuration"
    ),
    "lastCheckpointSizeBytes": MetricInfo(
        "bytes", "job", "size of the last completed checkpoint", "flink_jobmanager_job_lastCheckpointSize"
    ),
    "numRestarts": MetricInfo(
        "count", "job", "restarts since submission (a counter)", "flink_jobmanager_job_numRestarts", counter=True
    ),
    "jobRunning": MetricInfo("bool", "job", "1 when the job is RUNNING, 0 otherwise", "flink_jobmanager_job_uptime"),
    "taskManagers": MetricInfo("count", "job", "registered TaskManagers", "flink_jobmanager_numRegisteredTaskManagers"),
    "taskSlotsTotal": MetricInfo("count", "job", "slots offered by the TaskManagers", "flink_jobmanager_taskSlotsTotal"),
    "configParallelism": MetricInfo("count", "job", "parallelism in force", "flinktune_config_parallelism"),
    "configTaskSlots": MetricInfo("count", "job", "task slots per TaskManager in force", "flinktune_config_task_slots"),
    "configCpu": MetricInfo("cores", "job", "CPU per TaskManager in force", "flinktune_config_cpu"),
    "configMemoryMb": MetricInfo("MB", "job", "memory per TaskManager in force", "flinktune_config_memory_mb"),
    "configCheckpointIntervalS": MetricInfo("s", "job", "checkpoint interval in force", "flinktune_config_checkpoint_interval_s"),
}

#: Metrics that carry the configuration in force (one per knob).
CONFIG_METRICS: dict[str, str] = {
    "parallelism": "configParallelism",
    "task_slots": "configTaskSlots",
    "cpu": "configCpu",
    "memory_mb": "configMemoryMb",
    "checkpoint_interval_s": "configCheckpointIntervalS",
}

#: Cumulative counters: within a series they never fall except by a reset to a small value (a
#: redeploy); the raw_metrics contract's ``counter.counters_never_decrease`` rule lists the same.
COUNTER_METRICS: tuple[str, ...] = tuple(m for m, info in METRICS.items() if info.counter)

#: Columns of the profiling-observations table (one row per profiling run), as calibration takes them.
PROFILING_COLUMNS: tuple[str, ...] = (
    "job",
    "run_id",
    "ts_ms",
    "parallelism",
    "task_slots",
    "cpu",
    "memory_mb",
    "checkpoint_interval_s",
    "input_rate",
    "throughput",
    "latency_ms",
    "recovery_s",
    "cpu_used",
    "memory_used_mb",
)

#: The types every profiling-observations writer casts to (the other columns are float64 already).
PROFILING_DTYPES: dict[str, str] = {
    "job": "string",
    "run_id": "string",
    "ts_ms": "int64",
    "parallelism": "int64",
    "task_slots": "int64",
    "cpu": "float64",
    "memory_mb": "int64",
    "checkpoint_interval_s": "int64",
    "recovery_s": "float64",
}


class SchemaError(ValueError):
    """A frame does not have the raw schema; the message names the column."""


def empty_frame() -> pd.DataFrame:
    """An empty raw-metrics frame with the right dtypes."""
    return pd.DataFrame({c: pd.Series(dtype=t) for c, t in RAW_DTYPES.items()})


def validate_frame(df: pd.DataFrame, *, where: str = "raw metrics") -> pd.DataFrame:
    """Check columns and coerce dtypes; raise :class:`SchemaError` naming the offending column."""
    missing = [c for c in RAW_COLUMNS if c not in df.columns]
    if missing:
        raise SchemaError(f"{where}: missing column(s) {missing}; expected {list(RAW_COLUMNS)}")
    extra = [c for c in df.columns if c not in RAW_COLUMNS]
    if extra:
        raise SchemaError(f"{where}: unexpected column(s) {extra}; expected {list(RAW_COLUMNS)}")
    out = df[list(RAW_COLUMNS)].copy()
    for col, dtype in RAW_DTYPES.items():
        try:
            out[col] = out[col].astype(dtype)
        except (TypeError, ValueError) as exc:
            raise SchemaError(f"{where}: column {col!r} cannot be read as {dtype}: {exc}") from None
    unknown = sorted(set(out["metric"].dropna().unique()) - set(METRICS))
    if unknown:
        raise SchemaError(f"{where}: unknown metric name(s) {unknown[:5]}")
    return out
