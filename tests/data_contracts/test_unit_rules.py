"""Unit rules of the curated feature contracts: values no job in the row's configuration can show
(CPU in percent, heap in bytes, latency in seconds) fail the batch; the same rules as the decision
path's quality gates (flinktune.metrics.quality). The ETL validates curated features on pandas."""

from __future__ import annotations

import pandas as pd
import pytest

from data_contracts import ContractViolation, validate
from flinktune.etl.curated import to_features_frame
from flinktune.etl.features import FEATURE_COLUMNS

BAD = {
    "row.cpu_within_cores_reserved": ("cpu_used", 55.0),  # 2 TaskManagers x 1 core: 55 is a percentage
    "row.heap_within_memory_configured": ("memory_used_mb", 2.1e9),  # bytes, not MB
    "row.latency_in_milliseconds": ("latency_p50_ms", 0.2),  # seconds, not ms
}


def features(n: int = 3) -> pd.DataFrame:
    row = {c: 1.0 for c in FEATURE_COLUMNS[2:]}
    row.update(
        taskmanagers=2,
        task_slots_total=2,
        parallelism=2,
        task_slots=1,
        cpu=1.0,
        memory_mb=2048,
        cpu_used=1.5,
        memory_used_mb=1000.0,
        latency_p50_ms=80.0,
        latency_p95_ms=120.0,
        latency_p99_ms=150.0,
        checkpoint_interval_s=30,
        samples=60,
        restarts=0,
    )
    df = pd.DataFrame([row] * n)
    df.insert(0, "window_start", pd.date_range("2024-05-01", periods=n, freq="min", tz="UTC"))
    df.insert(0, "job", "demo")
    return to_features_frame(df)


def test_a_clean_batch_passes_and_unit_errors_fail_the_features_contract(tmp_path):
    df = features()
    assert not [
        f for f in validate(df, "features_1m", batch_id="ok", quarantine_root=tmp_path).failures if f.rule.startswith("row.")
    ]
    for row, (column, value) in enumerate(BAD.values()):
        df.loc[row, column] = value
    with pytest.raises(ContractViolation) as err:
        validate(df, "features_1m", batch_id="units", quarantine_root=tmp_path)
    for rule, (column, _) in BAD.items():
        assert f"rule {rule} column '{column}', 1 offending" in str(err.value), str(err.value)
