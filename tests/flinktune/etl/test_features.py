"""The raw -> features_10s / features_1m transform on a tiny hand-built raw batch, checked against
hand-computed numbers, and the minutes checked against the 10-s windows they are merged from."""

from __future__ import annotations

import pandas as pd
import pytest

from flinktune.etl.features import FEATURE_COLUMNS, features_1m, features_10s, read_raw
from flinktune.etl.synthetic import synthetic_raw
from flinktune.lake import Lake

pytestmark = pytest.mark.spark
M0 = 1_699_999_980_000  # a minute boundary (2023-11-14T22:13Z)
SECONDS = (0, 30, 60, 90)  # two samples in each of two minutes


def job_series(metric: str, values) -> list[tuple]:
    return [("t", metric, "", -1, M0 + s * 1000, v) for s, v in zip(SECONDS, values) if v is not None]


def subtask_series(metric: str, per_vertex: dict[str, list[tuple]]) -> list[tuple]:
    """per_vertex: vertex -> per second, a tuple of per-subtask values."""
    return [
        ("t", metric, vertex, i, M0 + s * 1000, v)
        for vertex, seconds in per_vertex.items()
        for s, values in zip(SECONDS, seconds)
        for i, v in enumerate(values)
    ]


def raw_frame() -> pd.DataFrame:
    rows = []
    rows += job_series("workloadRate", [100, 200, 300, 500])
    rows += job_series("pendingRecords", [10, 40, 100, 70])
    rows += job_series("latencyP50Ms", [10, 12, 5, 6])
    rows += job_series("latencyP95Ms", [50, 80, 20, 30])
    rows += job_series("latencyP99Ms", [100, 150, 40, 45])
    rows += job_series("cpuLoad", [1, 3, 2, 2])
    rows += job_series("heapUsedMb", [1000, 2000, 1500, 1500])
    rows += job_series("numRestarts", [2, 3, 1, 2])  # +1, then a reset to 1 (counts 1), then +1
    rows += job_series("jobRunning", [1, 0, 1, 1])
    rows += job_series("taskManagers", [4, 5, 5, 6])
    rows += job_series("taskSlotsTotal", [8, 10, 10, 12])
    rows += job_series("lastCheckpointDurationMs", [100, 200, 300, 400])
    rows += job_series("configParallelism", [8, 8, 12, None])
    rows += job_series("configTaskSlots", [2, None, None, None])  # carried into minute 1
    rows += job_series("configCpu", [1, 1, 1, 1])
    rows += job_series("configMemoryMb", [2048] * 4)
    rows += job_series("configCheckpointIntervalS", [30] * 4)
    rows += subtask_series(
        "numRecordsInPerSecond", {"src": [(40, 50), (60, 60), (100, 100), (0, 0)], "map": [(80,), (100,), (150,), (300,)]}
    )
    rows += subtask_series(
        "busyTimeMsPerSecond", {"src": [(200, 400), (900, 900), (1100, 1100), (0, 0)], "map": [(500,), (100,), (0,), (200,)]}
    )
    rows += subtask_series(
        "backPressuredTimeMsPerSecond", {"src": [(100, 300), (0, 0), (0, 0), (0, 0)], "map": [(0,), (0,), (0,), (0,)]}
    )
    # Outside the window read below, and another job: both must be ignored.
    rows += [("t", "workloadRate", "", -1, M0 + 120_000, 9e9), ("other", "workloadRate", "", -1, M0, 9e9)]
    df = pd.DataFrame(rows, columns=["job", "metric", "vertex", "subtask", "ts_ms", "value"])
    return df.astype({"subtask": "int32", "value": "float64"})


EXPECTED = {
    # column: (minute 0, minute 1), computed by hand from raw_frame()
    "input_rate": (150.0, 400.0),
    "throughput": ((90 + 120) / 2, (200 + 300) / 2),  # max over vertices of summed records in
    "lag": (25.0, 85.0),
    "lag_growth": ((40 - 10) / 30, (70 - 100) / 30),
    "latency_p50_ms": (12.0, 6.0),  # max of per-second quantiles
    "latency_p95_ms": (80.0, 30.0),
    "latency_p99_ms": (150.0, 45.0),
    "cpu_used": (2.0, 2.0),
    "memory_used_mb": (1500.0, 1500.0),
    "busy_ratio": ((0.5 + 0.9) / 2, (1.0 + 0.2) / 2),  # per vertex mean, max over vertices, 1.1 clipped to 1
    "backpressure_ratio": ((0.2 + 0.0) / 2, 0.0),
    "taskmanagers": (5, 6),
    "task_slots_total": (10, 12),
    "parallelism": (8, 12),
    "task_slots": (2, 2),
    "cpu": (1.0, 1.0),
    "memory_mb": (2048, 2048),
    "checkpoint_interval_s": (30, 30),
    "checkpoint_duration_ms": (200.0, 400.0),
    "restarts": (1, 2),
    "up_fraction": (0.5, 1.0),
    "samples": (2, 2),
}


def test_features_1m_matches_hand_computed_minutes(spark, tmp_path):
    lake = Lake(tmp_path / "lake")
    lake.write_raw(raw_frame())
    raw = read_raw(spark, lake.raw_metrics_dir, "t", M0, M0 + 120_000)
    out = features_1m(raw).toPandas()
    assert list(out.columns) == list(FEATURE_COLUMNS)
    assert list(out["job"]) == ["t", "t"]
    assert list(pd.to_datetime(out["window_start"], utc=True)) == [
        pd.Timestamp(M0, unit="ms", tz="UTC"),
        pd.Timestamp(M0 + 60_000, unit="ms", tz="UTC"),
    ]
    for column, expected in EXPECTED.items():
        assert tuple(out[column]) == pytest.approx(expected), column


EXPECTED_10S = {
    # column: the four 10-s windows holding seconds 0, 30, 60 and 90 (one sample each)
    "input_rate": (100, 200, 300, 500),
    "throughput": (90, 120, 200, 300),
    "lag": (10, 40, 100, 70),
    "latency_p50_ms": (10, 12, 5, 6),
    "latency_p95_ms": (50, 80, 20, 30),
    "latency_p99_ms": (100, 150, 40, 45),
    "cpu_used": (1, 3, 2, 2),
    "memory_used_mb": (1000, 2000, 1500, 1500),
    "busy_ratio": (0.5, 0.9, 1.0, 0.2),
    "backpressure_ratio": (0.2, 0.0, 0.0, 0.0),
    "taskmanagers": (4, 5, 5, 6),
    "task_slots_total": (8, 10, 10, 12),
    "parallelism": (8, 8, 12, 12),  # carried into the last window
    "task_slots": (2, 2, 2, 2),
    "checkpoint_duration_ms": (100, 200, 300, 400),
    "restarts": (0, 1, 1, 1),  # the first sample has no predecessor; 3 -> 1 is a reset counting 1
    "up_fraction": (1, 0, 1, 1),
    "samples": (1, 1, 1, 1),
}


def test_features_10s_matches_hand_computed_windows(spark, tmp_path):
    lake = Lake(tmp_path / "lake")
    lake.write_raw(raw_frame())
    out = features_10s(read_raw(spark, lake.raw_metrics_dir, "t", M0, M0 + 120_000)).toPandas()
    assert list(out.columns) == list(FEATURE_COLUMNS)
    assert list(pd.to_datetime(out["window_start"], utc=True)) == [
        pd.Timestamp(M0 + s * 1000, unit="ms", tz="UTC") for s in SECONDS
    ]
    for column, expected in EXPECTED_10S.items():
        assert tuple(out[column]) == pytest.approx(expected), column
    assert out["lag_growth"].isna().all()  # one sample per window: no growth to measure


def test_minutes_are_the_10s_windows_merged_by_each_columns_rule(spark, tmp_path):
    start = 1_714_521_600_000  # 2024-05-01T00:00Z; numRestarts is 635008 throughout
    raw = synthetic_raw("m", start, 180, vertices=2, subtasks=3, seed=4)
    sec = (raw["ts_ms"] - start) // 1000
    raw = raw[~sec.between(13, 17) & ~sec.between(60, 75)].copy()  # gaps, one a whole 10-s window
    sec = (raw["ts_ms"] - start) // 1000
    counter = raw["metric"] == "numRestarts"
    raw.loc[counter & (sec >= 95), "value"] += 2  # two restarts in minute 1...
    raw.loc[counter & (sec >= 150), "value"] = 1  # ...a redeploy and one restart in minute 2
    raw.loc[(raw["metric"] == "configParallelism") & (sec >= 100), "value"] = 12
    lake = Lake(tmp_path / "lake")
    lake.write_raw(raw)
    frame = read_raw(spark, lake.raw_metrics_dir, "m")
    ten, mins = features_10s(frame).toPandas(), features_1m(frame).toPandas()
    assert len(ten) == 18 - 1 and len(mins) == 3  # the 10-s window of seconds 60-69 has no sample
    ten["minute"] = pd.to_datetime(ten["window_start"], utc=True).dt.floor("min")
    g = ten.groupby("minute")
    assert list(g["samples"].sum()) == list(mins["samples"]) == [55, 44, 60]
    assert list(g["restarts"].sum()) == list(mins["restarts"]) == [0, 2, 1]
    for column in (
        "input_rate",
        "throughput",
        "lag",
        "cpu_used",
        "memory_used_mb",
        "busy_ratio",
        "backpressure_ratio",
        "up_fraction",
    ):
        weighted = (ten[column] * ten["samples"]).groupby(ten["minute"]).sum() / g[
            "samples"
        ].sum()  # every metric in every second
        assert list(weighted) == pytest.approx(list(mins[column]), rel=1e-12), column
    for column in ("latency_p50_ms", "latency_p95_ms", "latency_p99_ms"):
        assert list(g[column].max()) == list(mins[column]), column
    for column in ("taskmanagers", "task_slots_total", "checkpoint_duration_ms", "parallelism", "cpu", "memory_mb"):
        assert list(g[column].last()) == list(mins[column]), column
    assert list(mins["parallelism"]) == [24, 12, 12]


def test_a_counter_takes_the_latest_sample_of_each_second(spark, tmp_path):
    # 5, 5 | 0 (a redeploy) then 1 within one second: one restart. A mean of the second (0.5)
    # would count the reset as 0.5 and miss the restart.
    rows = [("c", "numRestarts", "", -1, M0 + ms, v) for ms, v in ((0, 5), (1000, 5), (1400, 0), (1900, 1), (2000, 1))]
    lake = Lake(tmp_path / "lake")
    lake.write_raw(pd.DataFrame(rows, columns=["job", "metric", "vertex", "subtask", "ts_ms", "value"]))
    frame = read_raw(spark, lake.raw_metrics_dir, "c")
    assert list(features_10s(frame).toPandas()["restarts"]) == [1]
    assert list(features_1m(frame).toPandas()["restarts"]) == [1]


FOREIGN = 123456.789  # the misplaced rows' rate: absent from what is read


def _plant_foreign_rows(lake: Lake, job: str, other: str) -> None:
    """A file inside ``job``'s raw partition whose own ``job`` column names ``other`` (a misplaced writer)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    rows = raw_frame().assign(job=other)
    rows = rows[rows["metric"] == "workloadRate"].assign(value=FOREIGN)
    hour = pd.Timestamp(int(rows["ts_ms"].iloc[0]), unit="ms", tz="UTC")
    folder = lake.raw_job_dir(job) / f"date={hour:%Y-%m-%d}" / f"hour={hour:%H}"
    pq.write_table(pa.Table.from_pandas(rows.reset_index(drop=True), preserve_index=False), folder / "part-foreign.parquet")


def test_rows_of_another_job_inside_a_jobs_partition_are_dropped_with_a_line(spark, tmp_path, caplog):
    lake = Lake(tmp_path / "lake")
    lake.write_raw(raw_frame())
    _plant_foreign_rows(lake, "t", "other")
    with caplog.at_level("WARNING"):
        raw = read_raw(spark, lake.raw_metrics_dir, "t", M0, M0 + 120_000).toPandas()
    assert set(raw["job"]) == {"t"} and FOREIGN not in set(raw["value"])
    assert "rows of job(s) ['other'] in its partition dropped" in caplog.text
    # The pandas reader (the decision loop's) drops them the same way, naming the file.
    with caplog.at_level("WARNING"):
        window = lake.read_raw("t")
    assert set(window["job"]) == {"t"} and FOREIGN not in set(window["value"]) and "part-foreign.parquet" in caplog.text
