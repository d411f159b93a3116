"""The bad-input corpus: 34 cases of broken raw metrics (26 on pandas, stale data against an injected
clock among them; 8 through the Spark ETL), each stopped or flagged with a message naming the
dataset, the rule and sample values, and none of them changing the curated lake (both grains).

Engine-independent rules run on the pandas engine of the same contract (fast); what only shows on
Spark or in files (NaN as Spark sees it, duplicates across files, truncated or mistyped files,
samples in the wrong hour, unit errors read back from the lake) runs through ``jobs.etl_features``
on the one shared Spark session. Rules whose contract severity is ``warning`` (gaps, partial
scrapes, stale data) are shown as warnings that name the same things; the lake is checked either way.
"""

from __future__ import annotations

import datetime as dt
import re
import shutil
from collections.abc import Callable

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import jobs.etl_features as etl
from data_contracts import ContractViolation, load_contract, validate
from flinktune.etl import curated
from flinktune.etl.features import FEATURE_COLUMNS, NoRawDataError
from flinktune.etl.raw_files import RawFileError
from flinktune.etl.synthetic import synthetic_raw
from flinktune.lake import Lake
from flinktune.settings import Settings

START = 1_714_521_600_000  # 2024-05-01T00:00Z
MIN = 60_000
CONTRACT = load_contract("raw_metrics")
SEVERITY = {r.id: r.severity for r in CONTRACT.rules()}


def good(minutes: int = 3, start: int = START) -> pd.DataFrame:
    return synthetic_raw("demo", start, minutes * 60, vertices=1, subtasks=2, seed=1)


def where(df: pd.DataFrame, metric: str, n: int | None = None) -> pd.Index:
    idx = df.index[df["metric"] == metric]
    return idx if n is None else idx[:n]


def setv(metric: str, value: object, n: int | None = 1) -> Callable[[pd.DataFrame], pd.DataFrame]:
    def f(df: pd.DataFrame) -> pd.DataFrame:
        df.loc[where(df, metric, n), "value"] = value
        return df

    return f


def drop_metric(metric: str, after_ms: int | None = None) -> Callable[[pd.DataFrame], pd.DataFrame]:
    def f(df: pd.DataFrame) -> pd.DataFrame:
        hit = df["metric"] == metric
        if after_ms is not None:
            hit &= df["ts_ms"] >= START + after_ms
        return df[~hit].reset_index(drop=True)

    return f


def rename(column: str, old: object, new: object) -> Callable[[pd.DataFrame], pd.DataFrame]:
    def f(df: pd.DataFrame) -> pd.DataFrame:
        df[column] = df[column].astype(object).where(df[column] != old, new)
        return (
            df.astype({"job": "string", "metric": "string", "vertex": "string"})
            if column != "subtask"
            else df.astype({"subtask": "int32"})
        )

    return f


def _dup(df):
    return pd.concat([df, df[df["metric"] == "cpuLoad"].head(2)], ignore_index=True)


def _gap(df):
    return df[(df["ts_ms"] < START + MIN) | (df["ts_ms"] >= START + 2 * MIN)].reset_index(drop=True)


def _ts_seconds(df):
    df.loc[df.index[:3], "ts_ms"] = df.loc[df.index[:3], "ts_ms"] // 1000
    return df


def _ts_micros(df):
    df.loc[df.index[:3], "ts_ms"] = df.loc[df.index[:3], "ts_ms"] * 1000
    return df


def _vertex_lost(df):
    df.loc[where(df, "busyTimeMsPerSecond", 2), "vertex"] = ""
    return df


def _job_metric_per_subtask(df):
    df.loc[where(df, "cpuLoad", 2), "subtask"] = 3
    return df


def _counter_falls(df):
    # numRestarts is 635008 all along (synthetic: floor(epoch s / 2700)); one sample falls by one.
    df.loc[where(df, "numRestarts")[10], "value"] = 635007.0
    return df


def _null_job(df):
    df.loc[df.index[:2], "job"] = pd.NA
    return df


#: kind -> (mutation of a good 3-minute batch, rule id, a fragment the message must hold)
PANDAS_CASES: dict[str, tuple[Callable[[pd.DataFrame], pd.DataFrame], str, str]] = {
    "nan_value": (setv("cpuLoad", float("nan")), "value.not_null", "value"),  # pandas: NaN is the missing marker
    "positive_infinity": (setv("heapUsedMb", float("inf")), "value.finite", "[inf]"),
    "negative_infinity": (setv("pendingRecords", float("-inf")), "value.finite", "[-inf]"),
    "negative_rate": (setv("numRecordsInPerSecond", -5.0), "value.range", "-5.0"),
    "duplicate_samples": (_dup, "uniqueness", "cpuLoad"),
    "gap_in_scrapes": (_gap, "completeness.per_window", "2024-05-01T00:01:00"),
    "timestamps_in_seconds": (_ts_seconds, "ts_ms.range", "1714521600"),
    "timestamps_in_microseconds": (_ts_micros, "ts_ms.range", "1714521600000000"),
    "renamed_metric": (rename("metric", "busyTimeMsPerSecond", "busyTimeMsPerSec"), "metric.allowed", "busyTimeMsPerSec"),
    "missing_metric": (drop_metric("numRecordsInPerSecond"), "required.metrics", "numRecordsInPerSecond"),
    "partial_scrape": (
        drop_metric("busyTimeMsPerSecond", after_ms=2 * MIN),
        "required.metrics_per_window",
        "2024-05-01T00:02:00+00:00: busyTimeMsPerSecond",
    ),
    "lost_vertex_label": (_vertex_lost, "row.subtask_metrics_name_their_vertex", "'vertex': ''"),
    "job_metric_labelled_per_subtask": (_job_metric_per_subtask, "row.job_metrics_are_not_per_subtask", "'subtask': 3"),
    "busy_time_in_microseconds": (setv("busyTimeMsPerSecond", 500_000.0, 2), "row.time_per_second_at_most_a_second", "500000.0"),
    "job_running_not_a_flag": (setv("jobRunning", 2.0), "row.job_running_is_a_flag", "'value': 2.0"),
    "absurd_rate": (setv("workloadRate", 5e12), "row.rates_are_plausible", "5000000000000.0"),
    "absurd_latency": (setv("latencyP99Ms", 1e10), "row.latencies_below_a_day", "10000000000.0"),
    "absurd_lag": (setv("pendingRecords", 1e15), "row.lag_is_plausible", "1000000000000000.0"),
    "value_as_text": (lambda df: df.astype({"value": "string"}), "value.type", "contract says double"),
    "subtask_as_int64": (lambda df: df.astype({"subtask": "int64"}), "subtask.type", "int64"),
    "missing_column": (lambda df: df.drop(columns=["vertex"]), "vertex.exists", "column missing"),
    "null_job": (_null_job, "job.not_null", "job"),
    "job_name_with_a_slash": (rename("job", "demo", "team/demo"), "job.regex", "team/demo"),
    "empty_window": (lambda df: df.iloc[0:0], "completeness.min_rows", "0"),
    "counter_falls_without_a_reset": (
        _counter_falls,
        "counter.counters_never_decrease",
        "'ts_ms': 1714521610000, 'previous': 635008.0, 'value': 635007.0",
    ),
}


def names_rule(text: str, rule: str) -> bool:
    return re.search(rf"rule {re.escape(rule)}(?![\w.])", text) is not None


def snapshot(root) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.fixture
def lake_with_curated(tmp_path):
    """A lake whose curated features_1m already holds two good minutes (the state to keep; the
    snapshots cover all of curated/, so a stray write to any dataset shows)."""
    lake = Lake(tmp_path / "lake")
    rows = pd.DataFrame({c: [1.0, 2.0] for c in FEATURE_COLUMNS})
    rows["job"] = "demo"
    rows["window_start"] = pd.to_datetime([START - 2 * MIN, START - MIN], unit="ms", utc=True)
    curated.write_features(lake.curated_root, "demo", {"features_1m": rows}, START - 2 * MIN, START)
    return lake


def test_the_corpus_has_at_least_25_kinds():
    assert len(PANDAS_CASES) + len(SPARK_CASES) >= 25


@pytest.mark.parametrize("kind", sorted(PANDAS_CASES))
def test_pandas_corpus(kind, lake_with_curated):
    mutate, rule, fragment = PANDAS_CASES[kind]
    lake = lake_with_curated
    before = snapshot(lake.root / "curated")
    df = mutate(good())
    now = dt.datetime(2024, 5, 1, 0, 3, tzinfo=dt.UTC)
    if SEVERITY[rule] == "error":
        with pytest.raises(ContractViolation) as err:
            validate(df, "raw_metrics", batch_id=f"corpus-{kind}", quarantine_root=lake.root / "quarantine", now=now)
        msg = str(err.value)
        assert "dataset 'raw_metrics'" in msg and names_rule(msg, rule) and fragment in msg, msg
        report = (err.value.quarantine_path / "report.md").read_text()
        assert f"`{rule}`" in report
    else:
        outcome = validate(df, "raw_metrics", batch_id=f"corpus-{kind}", quarantine_root=lake.root / "quarantine", now=now)
        text = " ".join(f.describe() for f in outcome.warnings)
        assert names_rule(text, rule) and "[warning]" in text and fragment in text, text
    assert snapshot(lake.root / "curated") == before


def test_stale_data_is_flagged_against_the_injected_clock(lake_with_curated):
    late = dt.datetime(2024, 5, 1, 2, 0, tzinfo=dt.UTC)  # the newest sample is ~2 h old
    outcome = validate(
        good(), "raw_metrics", batch_id="corpus-stale", quarantine_root=lake_with_curated.root / "quarantine", now=late
    )
    (f,) = [f for f in outcome.failures if f.rule == "freshness"]
    assert f.severity == SEVERITY["freshness"] and f.sample == (START + 3 * MIN - 1000,) and "expected between" in f.detail


# ---------------------------------------------------------------- Spark and file-level kinds


def _write_file(lake: Lake, df: pd.DataFrame, name: str, hour: str = "00", table: pa.Table | None = None) -> None:
    d = lake.raw_job_dir("demo") / "date=2024-05-01" / f"hour={hour}"
    d.mkdir(parents=True, exist_ok=True)
    pq.write_table(table if table is not None else pa.Table.from_pandas(df.drop(columns=["job"]), preserve_index=False), d / name)


def s_nan(lake):
    df = good(1, START + 3 * MIN).drop(columns=["job"])
    df.loc[where(df, "cpuLoad", 2), "value"] = float("nan")
    # A foreign writer (Spark, Java) keeps NaN as NaN; pandas -> Arrow would make it a null.
    table = pa.table({c: pa.array(df[c].to_numpy()) for c in df.columns})
    _write_file(lake, df, "part-nan.parquet", table=table)


def s_duplicate_files(lake):
    df = good(1, START + 3 * MIN)
    lake.write_raw(df)
    _write_file(lake, df, "part-left-over-by-a-crash.parquet")  # the same samples again


def s_truncated(lake):
    lake.write_raw(good(1, START + 3 * MIN))
    f = next(lake.raw_job_dir("demo").rglob("part-*.parquet"))
    f.write_bytes(f.read_bytes()[:200])


def s_mistyped_file(lake):
    df = good(1, START + 3 * MIN).drop(columns=["job"])
    _write_file(lake, df, "part-typed.parquet", table=pa.Table.from_pandas(df.astype({"value": "string"}), preserve_index=False))


def s_wrong_hour(lake):
    _write_file(lake, good(1, START + 2 * 3_600_000), "part-arrival-order.parquet", hour="00")


def s_counter_falls(lake):
    df = good(1, START + 3 * MIN)
    df.loc[where(df, "numRestarts"), "value"] = 635007.0  # the next minute's restarts counter is one lower
    lake.write_raw(df)


def s_seconds_in_lake(lake):
    df = good(1, START + 3 * MIN)
    lake.write_raw(df)
    odd = df.head(3).copy()
    odd["ts_ms"] = odd["ts_ms"] // 1000  # a producer that wrote seconds: it lands in January 1970
    lake.write_raw(odd)


def s_sample_in_2099(lake):
    odd = good(1, START + 3 * MIN).head(3).copy()
    odd["ts_ms"] = 4_070_908_800_000  # 2099-01-01: a producer's clock, not a restart counter, is wrong
    lake.write_raw(odd)


#: kind -> (how to break the lake after a good first run, exception, fragments the message must hold)
SPARK_CASES: dict[str, tuple[Callable[[Lake], None], type[Exception], tuple[str, ...]]] = {
    "spark_nan_value": (s_nan, ContractViolation, ("'raw_metrics'", "rule value.finite", "[nan, nan]")),
    "duplicates_across_files": (s_duplicate_files, ContractViolation, ("'raw_metrics'", "rule uniqueness", "'rows': 2")),
    "truncated_file": (s_truncated, RawFileError, ("'raw_metrics'", "rule file.readable", "part-")),
    "file_with_wrong_column_type": (
        s_mistyped_file,
        RawFileError,
        ("'raw_metrics'", "rule file.schema", "'value' stored as string"),
    ),
    "samples_in_the_wrong_hour": (s_wrong_hour, RawFileError, ("'raw_metrics'", "rule file.partition", "2024-05-01 02:00:00")),
    "a_sample_in_2099": (s_sample_in_2099, ValueError, ("ts_ms 4070908800000", "2099-01-01 00:00 UTC", "in the future")),
    "seconds_read_back_from_the_lake": (
        s_seconds_in_lake,
        ContractViolation,
        ("'raw_metrics'", "rule ts_ms.range", "1714521780"),
    ),
    "counter_falls_through_the_etl": (
        s_counter_falls,
        ContractViolation,
        (
            "'raw_metrics'",
            "rule counter.counters_never_decrease",
            "'ts_ms': 1714521780000, 'previous': 635008.0, 'value': 635007.0",
            "column 'value', 1 offending",
        ),
    ),
}


@pytest.fixture(scope="module")
def curated_var(tmp_path_factory, spark):
    """A var folder whose lake holds the good raw minutes and their curated features, built by one ETL run:
    each case starts from a copy of it (the same state a good first run leaves)."""
    var = tmp_path_factory.mktemp("corpus") / "var"
    built = Settings(var_dir=var, spark_master="local[2]", spark_shuffle_partitions=2)
    Lake(built.lake_dir).write_raw(good())
    etl.run(job="demo", settings=built)
    return var


@pytest.mark.spark
@pytest.mark.parametrize("kind", sorted(SPARK_CASES))
def test_spark_corpus_through_the_etl(kind, settings, curated_var):
    shutil.copytree(curated_var, settings.var_dir)
    lake = Lake(settings.lake_dir)
    before = snapshot(lake.root / "curated")
    assert {p.split("/")[0] for p in before} == {"_snapshots", "features_1m", "features_10s"}
    breaks, exc, fragments = SPARK_CASES[kind]
    breaks(lake)
    with pytest.raises(exc) as err:
        etl.run(job="demo", settings=settings)
    msg = str(err.value)
    assert all(f in msg for f in fragments), msg
    assert snapshot(lake.root / "curated") == before


@pytest.mark.spark
def test_empty_window_through_the_etl_names_job_and_range(settings, spark):
    lake = Lake(settings.lake_dir)
    lake.write_raw(good())
    with pytest.raises(NoRawDataError, match=rf"no raw samples in \[{START + 3_600_000}, {START + 3_660_000}\)"):
        etl.run(job="demo", start_ms=START + 3_600_000, end_ms=START + 3_660_000, settings=settings)
    assert not (lake.root / "curated").exists()
