"""Row rules and required values: strict parsing, and the pandas and one-pass Spark engines agree."""

from __future__ import annotations

import pandas as pd
import pytest
import yaml

from data_contracts import ContractError, load_contract, run_checks
from data_contracts.contract import CONTRACTS_DIR
from flinktune.etl.synthetic import synthetic_raw

START = 1_714_521_600_000


def with_rules(tmp_path, row_rules=None, required=None):
    doc = yaml.safe_load((CONTRACTS_DIR / "raw_metrics.yaml").read_text())
    if row_rules is not None:
        doc["row_rules"] = row_rules
    if required is not None:
        doc["required_values"] = required
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


@pytest.mark.parametrize(
    ("row_rules", "required", "fragment"),
    [
        (
            [
                {
                    "name": "r",
                    "when": {"column": "metric", "in": ["cpuLoad"]},
                    "check": {"column": "value", "range": {"max": 1}},
                    "colour": 1,
                }
            ],
            None,
            r"row_rules\[0\]: unknown key\(s\) \['colour'\]",
        ),
        (
            [{"name": "r", "when": {"column": "metric", "in": ["cpuLoad"]}, "check": {"column": "nope", "range": {"max": 1}}}],
            None,
            r"row_rules\[0\]\.check\.column: column 'nope' is not declared",
        ),
        (
            [
                {
                    "name": "r",
                    "when": {"column": "metric", "in": ["x"]},
                    "check": {"column": "value", "range": {"max": 1}, "allowed": [1]},
                }
            ],
            None,
            r"needs exactly one of range, allowed, regex",
        ),
        (
            [{"name": "r", "when": {"column": "metric", "in": []}, "check": {"column": "value", "range": {"max": 1}}}],
            None,
            r"row_rules\[0\]\.when\.in: must be a non-empty list",
        ),
        (
            None,
            [{"name": "m", "column": "metric", "values": ["cpuLoad"], "per_window": "yes"}],
            r"required_values\[0\]\.per_window: must be true or false",
        ),
    ],
)
def test_malformed_rules_are_named_with_file_and_key(tmp_path, row_rules, required, fragment):
    with pytest.raises(ContractError, match=fragment) as err:
        load_contract(with_rules(tmp_path, row_rules, required))
    assert "c.yaml" in str(err.value)


def broken() -> pd.DataFrame:
    df = synthetic_raw("demo", START, 180, vertices=1, subtasks=2, seed=1)
    df.loc[df.index[df["metric"] == "busyTimeMsPerSecond"][:3], "value"] = 2e6
    df.loc[df.index[df["metric"] == "cpuLoad"][:1], "subtask"] = 4
    return df[~((df["metric"] == "jobRunning") & (df["ts_ms"] >= START + 120_000))].reset_index(drop=True)


@pytest.mark.spark
def test_pandas_and_spark_find_the_same_row_and_required_failures(spark):
    contract = load_contract("raw_metrics")
    df = broken()
    on_pandas = run_checks(df, contract, batch_id="p")
    sdf = spark.createDataFrame(
        df.astype({"job": object, "metric": object, "vertex": object}),
        "job string, metric string, vertex string, subtask int, ts_ms long, value double",
    )
    on_spark = run_checks(sdf, contract, batch_id="s")
    key = lambda o: {(f.rule, f.severity, f.unexpected_count, repr(f.sample[:1])) for f in o.failures}  # noqa: E731
    assert key(on_pandas) == key(on_spark)
    assert {f.rule for f in on_spark.failures} == {
        "row.time_per_second_at_most_a_second",
        "row.job_metrics_are_not_per_subtask",
        "required.metrics_per_window",
    }
    (partial,) = [f for f in on_spark.failures if f.rule == "required.metrics_per_window"]
    assert partial.sample == ("2024-05-01T00:02:00+00:00: jobRunning",) and partial.severity == "warning"
