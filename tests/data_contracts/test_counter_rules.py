"""Counter rules: a cumulative counter may grow, stay, or reset to a small value, never fall otherwise;
pandas and Spark agree, the message names dataset, rule, series and values, and contracts parse strictly."""

from __future__ import annotations

import pandas as pd
import pytest
import yaml

from data_contracts import ContractError, ContractViolation, load_contract, run_checks, validate
from data_contracts.contract import CONTRACTS_DIR
from flinktune.metrics.schema import COUNTER_METRICS

T0 = 1_714_521_600_000  # 2024-05-01T00:00Z
RULE = "counter.counters_never_decrease"
SPARK_SCHEMA = "job string, metric string, vertex string, subtask int, ts_ms long, value double"


def counter_rows(
    values: list[float | None], *, metric: str = "numRestarts", vertex: str = "", subtask: int = -1, job: str = "demo"
) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "job": job,
            "metric": metric,
            "vertex": vertex,
            "subtask": subtask,
            "ts_ms": [T0 + i * 1000 for i in range(len(values))],
            "value": values,
        }
    )


def batch(*parts: pd.DataFrame) -> pd.DataFrame:
    df = pd.concat(parts, ignore_index=True)
    return df.astype(
        {"job": "string", "metric": "string", "vertex": "string", "subtask": "int32", "ts_ms": "int64", "value": "float64"}
    )


def on_spark(spark, df: pd.DataFrame):
    return spark.createDataFrame(df.astype({"job": object, "metric": object, "vertex": object}), SPARK_SCHEMA)


def counter_failures(df) -> list:
    return [f for f in run_checks(df, load_contract("raw_metrics"), batch_id="b").failures if f.rule == RULE]


def test_the_contract_watches_exactly_the_catalogues_counters():
    (rule,) = load_contract("raw_metrics").counters
    assert set(rule.when_in) == set(COUNTER_METRICS) == {"numRestarts"}
    assert (rule.series, rule.order, rule.value, rule.severity) == (
        ("job", "metric", "vertex", "subtask"),
        "ts_ms",
        "value",
        "error",
    )


@pytest.mark.parametrize(
    "values",
    [
        [0, 0, 1, 1, 3],  # grows or stays
        [5, 6, 0, 1, 1],  # redeployed: back to 0, then counts again
        [4, 4, 2, 3],  # a reset to half the previous value (two restarts since the redeploy)
        [3, None, 1],  # the null is skipped: 3 -> 1 is a reset
    ],
)
def test_growth_and_resets_pass(values):
    assert counter_failures(batch(counter_rows(values))) == []


def test_a_fall_that_is_no_reset_fails_naming_series_and_values(tmp_path):
    df = batch(
        counter_rows([3, 3, 4, 3, 4, 10, 6]),  # 4 -> 3 and 10 -> 6: above half, no reset
        counter_rows([7, 6], job="other"),  # another series of the same batch
        counter_rows([9, 1, 0.5], metric="cpuLoad"),  # not a counter: may fall
    )
    with pytest.raises(ContractViolation) as err:
        validate(df, "raw_metrics", batch_id="falls", quarantine_root=tmp_path)
    msg = str(err.value)
    assert "dataset 'raw_metrics'" in msg and f"rule {RULE} column 'value', 3 offending" in msg, msg
    first = {
        "job": "demo",
        "metric": "numRestarts",
        "vertex": "",
        "subtask": -1,
        "ts_ms": T0 + 3000,
        "previous": 4.0,
        "value": 3.0,
    }
    assert repr(first) in msg and "'previous': 10.0, 'value': 6.0" in msg and "'job': 'other'" in msg, msg
    assert "without a reset" in msg and "<= 0.5 x previous (a reset)" in msg
    assert f"`{RULE}`" in (err.value.quarantine_path / "report.md").read_text()


def test_series_are_judged_apart_and_ties_never_fall():
    # Each subtask's counter grows; interleaved by time they would seem to fall.
    df = batch(counter_rows([10, 11, 12], vertex="v", subtask=0), counter_rows([2, 3, 4], vertex="v", subtask=1))
    assert counter_failures(df) == []
    tie = batch(counter_rows([5, 4]).assign(ts_ms=T0))  # same time twice: uniqueness's business
    assert counter_failures(tie) == []


@pytest.mark.spark
def test_spark_finds_the_same_falls_as_pandas(spark):
    df = batch(
        counter_rows([3, 3, 4, 3, 4, 10, 6]),
        counter_rows([7, 6], job="other"),
        counter_rows([5, 0, 1], job="third"),
        counter_rows([9, 1], metric="cpuLoad"),
    )
    (with_pandas,) = counter_failures(df)
    (with_spark,) = counter_failures(on_spark(spark, df))
    assert with_spark.unexpected_count == with_pandas.unexpected_count == 3
    assert list(with_spark.sample) == list(with_pandas.sample)
    assert counter_failures(on_spark(spark, batch(counter_rows([5, 6, 0, 1])))) == []


def _steps(*runs: tuple[float, int]) -> list[float]:
    """A counter holding each value for so many 1-s samples (runs cross the contract's 60-s windows)."""
    return [float(v) for v, n in runs for _ in range(n)]


@pytest.mark.spark
@pytest.mark.parametrize(
    ("parts", "rescans"),
    [
        # Clean, a reset back to a value seen before, no fall: judged from the one pass alone.
        ([counter_rows(_steps((0, 70), (1, 70), (0, 45), (1, 5)))], 0),
        # A fall across a window boundary, and per-subtask series with a fall in one of them.
        (
            [
                counter_rows(_steps((5, 65), (4, 10))),
                counter_rows(_steps((10, 30), (12, 40)), vertex="v", subtask=0),
                counter_rows(_steps((2, 50), (1.5, 20)), vertex="v", subtask=1),
            ],
            0,
        ),
        # A value back within one window (3 4 3 4): runs interleave, so the counter rows are scanned.
        ([counter_rows([3, 4, 3, 4]), counter_rows(_steps((7, 5), (6, 5)), job="other")], 1),
        # Tied times with different values: runs touch, scanned too; ties never fall.
        ([batch(counter_rows([5, 4]).assign(ts_ms=T0)), counter_rows([1, 2], job="other")], 1),
    ],
)
def test_spark_one_pass_matches_pandas_and_scans_only_for_interleaved_runs(spark, monkeypatch, parts, rescans):
    import data_contracts.counter_rules as counter_rules

    scans, scan = [], counter_rules.counter_failures_spark
    monkeypatch.setattr(counter_rules, "counter_failures_spark", lambda *a: scans.append(a) or scan(*a))
    df = batch(*parts)
    with_pandas = counter_failures(df)
    assert counter_failures(on_spark(spark, df)) == with_pandas
    assert len(scans) == rescans
    if rescans == 0 and len(parts) > 1:
        assert with_pandas and with_pandas[0].unexpected_count == 2, with_pandas


def _contract(tmp_path, **change) -> str:
    doc = yaml.safe_load((CONTRACTS_DIR / "raw_metrics.yaml").read_text())
    doc["counters"][0].update(change)
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(doc))
    return str(path)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"reset_max_fraction": 1.5}, r"counters\[0\]\.reset_max_fraction: must be a number in \[0, 1\), got 1.5"),
        ({"series": ["job", "instance"]}, r"counters\[0\]\.series\[1\]: column 'instance' is not declared"),
        ({"order": "time"}, r"counters\[0\]\.order: column 'time' is not declared"),
        ({"when": {"column": "metric"}}, r"counters\[0\]\.when: must be a mapping with exactly the keys \['column', 'in'\]"),
        ({"reset_to": 0}, r"counters\[0\]: unknown key\(s\) \['reset_to'\]"),
        ({"severity": "fatal"}, r"counters\[0\]\.severity: severity must be one of"),
    ],
)
def test_bad_counter_rules_name_file_and_key(tmp_path, change, message):
    path = _contract(tmp_path, **change)
    with pytest.raises(ContractError, match=rf"^{path}: {message}"):
        load_contract(path)
