"""validate() on pandas batches: each rule kind fails on a crafted batch, quarantines it, names it."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from data_contracts import ContractViolation, validate
from flinktune.metrics.schema import PROFILING_COLUMNS

BASE_MS = 1_714_521_600_000  # 2024-05-01T00:00Z


def observations(n: int = 4) -> pd.DataFrame:
    """A valid profiling_observations batch."""
    return pd.DataFrame(
        {
            "job": pd.Series(["demo"] * n, dtype="string"),
            "run_id": pd.Series([f"run-{i}" for i in range(n)], dtype="string"),
            "ts_ms": np.arange(n, dtype="int64") * 60_000 + BASE_MS,
            "parallelism": np.array([8, 12, 16, 24][:n] * (n // 4 + 1), dtype="int64")[:n],
            "task_slots": np.ones(n, dtype="int64"),
            "cpu": np.full(n, 2.0),
            "memory_mb": np.full(n, 2048, dtype="int64"),
            "checkpoint_interval_s": np.full(n, 30, dtype="int64"),
            "input_rate": np.linspace(1e4, 4e4, n),
            "throughput": np.linspace(1e4, 4e4, n),
            "latency_ms": np.full(n, 120.0),
            "recovery_s": np.full(n, 90.0),
            "cpu_used": np.full(n, 5.0),
            "memory_used_mb": np.full(n, 6000.0),
        }
    )[list(PROFILING_COLUMNS)]


def _set(col, idx, value):
    def mutate(df):
        df[col] = df[col].astype(object) if isinstance(value, str) and df[col].dtype != "string" else df[col]
        df.loc[idx, col] = value
        return df

    return mutate


CASES = {
    # rule id: (mutation, offending value expected in the message)
    "latency_ms.range": (_set("latency_ms", 1, -5.0), "-5.0"),
    "throughput.not_null": (_set("throughput", 2, np.nan), "nan"),
    "cpu_used.finite": (_set("cpu_used", 0, np.inf), "inf"),
    "job.regex": (_set("job", 3, "bad/job"), "bad/job"),
    "run_id.type": (lambda df: df.assign(run_id=np.arange(len(df))), "int64"),
    "recovery_s.exists": (lambda df: df.drop(columns=["recovery_s"]), "recovery_s"),
    "uniqueness": (_set("run_id", 1, "run-0"), "run-0"),
    "completeness.min_rows": (lambda df: df.iloc[0:0], "0"),
}


@pytest.mark.parametrize("rule", sorted(CASES))
def test_each_rule_kind_fails_names_values_and_quarantines(tmp_path, rule):
    mutate, offending = CASES[rule]
    bad = mutate(observations())
    with pytest.raises(ContractViolation) as err:
        validate(bad, "profiling_observations", batch_id="b-1", quarantine_root=tmp_path / "q")
    msg = str(err.value)
    where = tmp_path / "q" / "profiling_observations" / "b-1"
    assert "profiling_observations" in msg and f"rule {rule}" in msg and offending in msg and str(where) in msg
    assert err.value.quarantine_path == where
    report = json.loads((where / "report.json").read_text())
    assert report["dataset"] == "profiling_observations" and not report["passed"]
    assert rule in {f["rule"] for f in report["failures"] if f["severity"] == "error"}
    assert f"`{rule}`" in (where / "report.md").read_text()
    assert len(pd.read_parquet(where / "batch.parquet")) == len(bad)
    assert sorted(p.name for p in where.parent.iterdir()) == ["b-1"]  # no temp folders left


def test_allowed_set_rule_names_the_value(tmp_path):
    raw = pd.DataFrame(
        {
            "job": pd.Series(["demo", "demo"], dtype="string"),
            "metric": pd.Series(["cpuLoad", "cpuLod"], dtype="string"),
            "vertex": pd.Series(["", ""], dtype="string"),
            "subtask": pd.Series([-1, -1], dtype="int32"),
            "ts_ms": pd.Series([BASE_MS, BASE_MS], dtype="int64"),
            "value": [1.0, 2.0],
        }
    )
    with pytest.raises(ContractViolation, match=r"rule metric\.allowed.*'cpuLod'"):
        validate(raw, "raw_metrics", batch_id="raw-1", quarantine_root=tmp_path)


def test_good_batch_passes_without_quarantine(tmp_path):
    outcome = validate(
        observations(), "profiling_observations", batch_id="ok", quarantine_root=tmp_path / "q", now=BASE_MS / 1000 + 600
    )
    assert outcome.passed and outcome.failures == [] and outcome.rows == 4
    assert not (tmp_path / "q").exists()


def test_warnings_are_returned_not_raised(tmp_path, caplog):
    df = observations()
    df.loc[1, "recovery_s"] = np.nan  # not_null is a warning for recovery_s
    a_day_later = BASE_MS / 1000 + 2 * 86_400  # stale: freshness is a warning
    outcome = validate(df, "profiling_observations", batch_id="w", quarantine_root=tmp_path, now=a_day_later)
    assert outcome.passed
    assert {f.rule for f in outcome.warnings} == {"recovery_s.not_null", "freshness"}
    assert "freshness" in caplog.text and not (tmp_path / "profiling_observations").exists()


def test_freshness_is_skipped_without_now_and_rerun_replaces_the_quarantine(tmp_path):
    df = observations()
    df.loc[0, "cpu"] = 0.0
    for _ in range(2):
        with pytest.raises(ContractViolation) as err:
            validate(df, "profiling_observations", batch_id="again", quarantine_root=tmp_path)
    assert "freshness (no now given)" in err.value.outcome.skipped
    assert [p.name for p in (tmp_path / "profiling_observations").iterdir()] == ["again"]


def test_bad_batch_id_is_refused_before_anything_is_written(tmp_path):
    with pytest.raises(ValueError, match=r"batch_id '../x'"):
        validate(observations(), "profiling_observations", batch_id="../x", quarantine_root=tmp_path)
