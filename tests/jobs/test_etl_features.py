"""jobs.etl_features end to end on local Spark: contracts gate both ends, both grains (features_10s,
features_1m) are written, reruns are byte-identical, a crash or a bad batch leaves the curated lake
as it was."""

from __future__ import annotations

import json

import pandas as pd
import pytest

import flinktune.runs.feature_etl as feature_etl
import jobs.etl_features as etl
from data_contracts import ContractViolation
from flinktune.etl import curated
from flinktune.etl.synthetic import synthetic_raw
from flinktune.lake import Lake

pytestmark = pytest.mark.spark
START = 1_714_521_600_000  # 2024-05-01T00:00Z
MIN = 60_000


def small_raw(minutes: int = 3, start: int = START) -> pd.DataFrame:
    return synthetic_raw("demo", start, minutes * 60, vertices=1, subtasks=2, seed=1)


def snapshot(root) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_rerun_is_byte_identical_and_a_crash_mid_commit_keeps_the_old_state(settings, spark, monkeypatch, capsys):
    lake = Lake(settings.lake_dir)
    lake.write_raw(small_raw())
    first = etl.run(job="demo", settings=settings)
    assert (first["rows"], first["start_ms"], first["end_ms"]) == (3, START, START + 3 * MIN)
    assert {ds: d["rows"] for ds, d in first["datasets"].items()} == {"features_1m": 3, "features_10s": 18}
    root = lake.root / "curated"
    before = snapshot(root)
    assert [k.rsplit("/", 1)[0] for k in before] == ["_snapshots"] + [
        f"{ds}/job=demo/date=2024-05-01" for ds in ("features_10s", "features_1m")
    ]
    ten = curated.read_features(lake.curated_root, "features_10s", "demo")
    assert list(ten["window_start"]) == list(pd.date_range("2024-05-01", periods=18, freq="10s", tz="UTC"))
    assert list(ten["samples"]) == [10] * 18

    again = etl.run(job="demo", start_ms=START + 5_000, end_ms=START + 3 * MIN - 1, settings=settings)  # widened to whole minutes
    assert (again["start_ms"], again["end_ms"]) == (START, START + 3 * MIN)
    assert snapshot(root) == before

    lake.write_raw(small_raw(start=START + 3 * MIN))  # new data would change the partition...

    def crash(root_, job, staged):
        raise RuntimeError("killed between stage and commit")

    monkeypatch.setattr(curated, "commit_snapshot", crash)
    with pytest.raises(RuntimeError, match="killed"):
        etl.run(job="demo", settings=settings)
    # ...but the crash left what readers see intact (the staged files wait, unnamed, for the next commit)
    assert {k: v for k, v in snapshot(root).items() if k in before} == before
    assert len(curated.read_features(lake.curated_root, "features_1m", "demo")) == 3


def test_bad_raw_batch_is_quarantined_before_transforming(settings, spark):
    lake = Lake(settings.lake_dir)
    lake.write_raw(small_raw())
    etl.run(job="demo", settings=settings)
    before = snapshot(lake.root / "curated")
    bad = small_raw(minutes=1, start=START + 3 * MIN)
    bad.loc[bad["metric"] == "cpuLoad", "value"] = -1.0
    lake.write_raw(bad)
    with pytest.raises(ContractViolation) as err:
        etl.run(job="demo", settings=settings)
    msg = str(err.value)
    assert "'raw_metrics'" in msg and "rule value.range" in msg and "-1.0" in msg
    where = settings.lake_dir / "quarantine" / "raw_metrics" / f"demo-{START}-{START + 4 * MIN}"
    assert err.value.quarantine_path == where and (where / "report.md").is_file()
    assert snapshot(lake.root / "curated") == before


def test_curated_contract_failure_quarantines_features_and_main_prints_json(settings, spark, monkeypatch, capsys):
    lake = Lake(settings.lake_dir)
    raw = small_raw(minutes=2)
    raw.loc[raw["metric"] == "configParallelism", "value"] = 0.0  # raw allows 0, features_1m needs >= 1
    lake.write_raw(raw)
    with pytest.raises(ContractViolation, match=r"'features_1m'.*rule parallelism\.range.*\[0, 0\]"):
        etl.run(job="demo", settings=settings)
    assert not (lake.root / "curated").exists()  # neither grain is written
    for ds in ("features_1m", "features_10s"):  # each failing grain is quarantined with its report
        assert (settings.lake_dir / "quarantine" / ds / f"demo-{START}-{START + 2 * MIN}" / "batch.parquet").is_file(), ds

    lake.write_raw(small_raw(minutes=2))  # same files, good values
    monkeypatch.setattr(feature_etl, "load_settings", lambda: settings)
    assert etl.main(["--job", "demo", "--start-ms", str(START)]) == 0
    summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert summary["dataset"] == "features_1m" and summary["rows"] == 2 and summary["path"].endswith("job=demo")
    assert summary["datasets"]["features_10s"]["rows"] == 12 and summary["datasets"]["features_10s"]["path"].endswith(
        "features_10s/job=demo"
    )
