"""validate_observations and write_observations: the profiling gate quarantines under the settings' lake; what passes is written once per run set."""

from __future__ import annotations

import pandas as pd
import pytest

from data_contracts import ContractViolation
from flinktune.clock import ManualClock
from flinktune.etl.observations import validate_observations, write_observations
from flinktune.lake import Lake
from flinktune.metrics.schema import PROFILING_COLUMNS

TS = 1_714_521_600_000


def runs() -> pd.DataFrame:
    row = dict(job="demo", run_id="r1", ts_ms=TS, parallelism=8, task_slots=2, cpu=1.0, memory_mb=2048, checkpoint_interval_s=30,
               input_rate=1e4, throughput=9e3, latency_ms=80.0, recovery_s=60.0, cpu_used=3.0, memory_used_mb=5000.0)  # fmt: skip
    return pd.DataFrame([row, {**row, "run_id": "r2", "task_slots": 3}])[list(PROFILING_COLUMNS)]


def test_good_runs_pass_and_freshness_uses_the_injected_clock(settings):
    fresh = validate_observations(runs(), settings, "p1", clock=ManualClock(TS / 1000 + 60))
    assert fresh.passed and fresh.failures == []
    stale = validate_observations(runs(), settings, "p2", clock=ManualClock(TS / 1000 + 3 * 86_400))
    assert stale.passed and [f.rule for f in stale.warnings] == ["freshness"]


def test_good_runs_are_written_once_per_run_set_and_one_job_only(settings):
    first = write_observations(runs(), settings)
    assert write_observations(runs(), settings) == first  # the same runs rewrite the same file
    assert first.parent.name == "job=demo" and "job" not in pd.read_parquet(first).columns
    assert len(list(Lake(settings.lake_dir).curated_dir("profiling_observations").rglob("*.parquet"))) == 1
    with pytest.raises(
        ValueError, match=r"profiling_observations: expected observations of exactly one job, got \['demo', 'other'\]"
    ):
        write_observations(pd.concat([runs(), runs().assign(job="other", run_id="r9")]), settings)


def test_bad_runs_are_quarantined_in_the_lake(settings):
    bad = runs()
    bad.loc[1, "memory_mb"] = 100
    with pytest.raises(ContractViolation, match=r"rule memory_mb\.range.*\[100\]") as err:
        validate_observations(bad, settings, "p3")
    assert err.value.quarantine_path == settings.lake_dir / "quarantine" / "profiling_observations" / "p3"
    assert (err.value.quarantine_path / "report.json").is_file()


def test_data_docs_switch_decides_whether_the_batch_runs_as_a_logged_checkpoint(tmp_path):
    from data_contracts.batch_log import read_batches
    from flinktune.settings import Settings

    on = Settings(var_dir=tmp_path / "on", data_docs=True)
    validate_observations(runs(), on, "p5", job="demo")
    quality = on.lake_dir / "quality"
    assert [b.batch_id for b in read_batches(quality, job="demo")] == ["p5"], "the batch is logged for the report"
    assert list(quality.rglob("index.html")), "Data Docs were published"
    off = Settings(var_dir=tmp_path / "off", data_docs=False)
    assert validate_observations(runs(), off, "p6", job="demo").passed
    assert not (off.lake_dir / "quality").exists(), "no Checkpoint, Data Docs or batch log when switched off"


def test_profiling_observations_failing_their_contract_are_quarantined_not_written(settings):
    row = {c: 1.0 for c in PROFILING_COLUMNS}
    row.update(
        job="demo",
        run_id="r1",
        ts_ms=1_704_067_200_000,
        parallelism=8,
        task_slots=1,
        cpu=1.0,
        memory_mb=1024,
        checkpoint_interval_s=10,
        input_rate=-5.0,
    )
    df = pd.DataFrame([row, {**row, "run_id": "r2", "input_rate": 1000.0}, {**row, "run_id": "r3", "input_rate": 2000.0}])
    with pytest.raises(ContractViolation, match="input_rate"):
        write_observations(df, settings)
    assert not list(Lake(settings.lake_dir).curated_dir("profiling_observations").rglob("*.parquet"))
    assert list(Lake(settings.lake_dir).quarantine_dir("profiling_observations").rglob("report.md"))
