"""validate() on Spark batches: pre-check (NaN, duplicates by hash aggregate) and GX rules agree with pandas."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from data_contracts import ContractViolation, validate

pytestmark = pytest.mark.spark
BASE_MS = 1_714_521_600_000
RAW_SCHEMA = "job string, metric string, vertex string, subtask int, ts_ms long, value double"


#: One sample of each metric the raw contract requires (required.metrics), after the cpuLoad rows.
REQUIRED = [("workloadRate", "", -1), ("jobRunning", "", -1), ("numRecordsInPerSecond", "map", 0),
            ("busyTimeMsPerSecond", "map", 0), ("backPressuredTimeMsPerSecond", "map", 0)]  # fmt: skip


def raw_rows(n: int = 6) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "job": ["demo"] * (n + len(REQUIRED)),
            "metric": ["cpuLoad"] * n + [m for m, _, _ in REQUIRED],
            "vertex": [""] * n + [v for _, v, _ in REQUIRED],
            "subtask": pd.Series([-1] * n + [s for _, _, s in REQUIRED], dtype="int32"),
            "ts_ms": [BASE_MS + 1000 * i for i in range(n)] + [BASE_MS] * len(REQUIRED),
            "value": [1.0 + i for i in range(n)] + [1.0] * len(REQUIRED),
        }
    )


def test_good_spark_batch_passes(spark, tmp_path):
    outcome = validate(spark.createDataFrame(raw_rows(), RAW_SCHEMA), "raw_metrics", batch_id="ok", quarantine_root=tmp_path)
    assert outcome.passed and outcome.failures == [] and outcome.rows == 6 + len(REQUIRED)


def test_spark_batch_with_nan_duplicates_and_bad_values_is_quarantined(spark, tmp_path):
    df = raw_rows()
    df.loc[1, "value"] = float("nan")  # GX "between" would not report it on Spark
    df.loc[2, "ts_ms"] = df.loc[3, "ts_ms"]  # a duplicate key
    df.loc[4, "value"] = -2.0
    df.loc[5, "subtask"] = -7
    with pytest.raises(ContractViolation) as err:
        validate(spark.createDataFrame(df, RAW_SCHEMA), "raw_metrics", batch_id="bad", quarantine_root=tmp_path)
    failures = {f.rule: f for f in err.value.outcome.errors}
    # subtask -7 on a job-level metric breaks the column range and the per-metric label rule
    assert set(failures) == {"value.finite", "uniqueness", "value.range", "subtask.range", "row.job_metrics_are_not_per_subtask"}
    assert failures["uniqueness"].unexpected_count == 2 and failures["uniqueness"].sample[0]["ts_ms"] == BASE_MS + 3000
    assert failures["value.range"].sample == (-2.0,) and failures["subtask.range"].sample == (-7,)
    msg = str(err.value)
    assert "raw_metrics" in msg and "rule value.finite" in msg and "[nan]" in msg and "-7" in msg
    where = tmp_path / "raw_metrics" / "bad"
    assert spark.read.parquet(str(where / "batch")).count() == 6 + len(REQUIRED)
    assert json.loads((where / "report.json").read_text())["quarantine_path"] == str(where)


def test_spark_type_mismatch_stops_before_gx(spark, tmp_path):
    from pyspark.sql import functions as F

    df = spark.createDataFrame(raw_rows(), RAW_SCHEMA).withColumn("subtask", F.col("subtask").cast("long"))
    with pytest.raises(ContractViolation, match=r"rule subtask\.type.*LongType, contract says int32"):
        validate(df, "raw_metrics", batch_id="types", quarantine_root=tmp_path)
