"""validate(gx_project=...): the contracts run as GX Checkpoints, publish Data Docs and log each batch."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from data_contracts import ContractViolation, GxProject, read_batches, validate
from tests.data_contracts.test_validate_pandas import observations


def test_passing_batch_runs_as_checkpoint_and_publishes_data_docs(tmp_path):
    project = GxProject(tmp_path / "gx")
    out = validate(
        observations(),
        "profiling_observations",
        batch_id="ok-1",
        quarantine_root=tmp_path / "q",
        gx_project=project.root,
        labels={"job": "demo"},
    )
    assert out.passed and out.data_docs_page is not None
    assert project.data_docs_index.is_file() and out.data_docs_page.is_file()
    assert "ok-1" in out.data_docs_page.parts  # the run is named by the batch id
    # The checkpoint, its validation definition (with the Data Docs action) and the result are saved in the project.
    gx_dir = project.root / "gx"
    checkpoint = json.loads((gx_dir / "checkpoints" / "profiling_observations_checkpoint.json").read_text())
    assert [a["type"] for a in checkpoint["actions"]] == ["update_data_docs"]
    assert (gx_dir / "validation_definitions" / "profiling_observations.json").is_file()
    results = list((gx_dir / "uncommitted" / "validations" / "profiling_observations_contract" / "ok-1").rglob("*.json"))
    assert len(results) == 1 and json.loads(results[0].read_text())["success"] is True
    (rec,) = read_batches(project.root, job="demo")
    assert rec.passed and rec.rows == 4 and rec.batch_id == "ok-1" and rec.data_docs_page == str(out.data_docs_page)
    assert read_batches(project.root, job="other") == []


def test_quarantined_batch_is_logged_with_its_rule_and_data_docs_page(tmp_path):
    bad = observations()
    bad.loc[1, "latency_ms"] = -5.0
    with pytest.raises(ContractViolation, match=r"latency_ms\.range"):
        validate(bad, "profiling_observations", batch_id="bad-1", quarantine_root=tmp_path / "q", gx_project=tmp_path / "gx")
    assert (tmp_path / "q" / "profiling_observations" / "bad-1" / "report.json").is_file()  # quarantine as before
    (rec,) = read_batches(tmp_path / "gx")
    assert not rec.passed and rec.quarantined and rec.quarantine_path == str(tmp_path / "q" / "profiling_observations" / "bad-1")
    assert any("latency_ms.range" in e for e in rec.errors)
    assert rec.data_docs_page and "bad-1" in rec.data_docs_page and "-5.0" in Path(rec.data_docs_page).read_text()


def test_a_moved_lake_reads_its_own_data_docs_and_quarantine(tmp_path):
    lake = tmp_path / "a" / "lake"
    bad = observations()
    bad.loc[1, "latency_ms"] = -5.0
    with pytest.raises(ContractViolation):
        validate(
            bad, "profiling_observations", batch_id="bad-1", quarantine_root=lake / "quarantine", gx_project=lake / "quality"
        )
    assert str(tmp_path / "a") not in (lake / "quality" / "batches.jsonl").read_text(), "paths inside the lake are relative"
    moved = tmp_path / "b" / "lake"
    shutil.move(tmp_path / "a", tmp_path / "b")
    (rec,) = read_batches(moved / "quality")
    assert rec.quarantine_path == str(moved / "quarantine" / "profiling_observations" / "bad-1")
    assert rec.data_docs_page and Path(rec.data_docs_page).is_file() and rec.data_docs_page.startswith(str(moved))


def test_schema_failure_is_logged_without_a_data_docs_page(tmp_path):
    bad = observations().assign(run_id=np.arange(4))
    with pytest.raises(ContractViolation, match=r"run_id\.type"):
        validate(bad, "profiling_observations", batch_id="bad-2", quarantine_root=tmp_path / "q", gx_project=tmp_path / "gx")
    (rec,) = read_batches(tmp_path / "gx")
    assert rec.quarantined and rec.data_docs_page is None and any("run_id.type" in e for e in rec.errors)


@pytest.mark.spark
def test_spark_batch_runs_its_gx_sample_as_a_checkpoint(spark, tmp_path):
    from tests.data_contracts.test_validate_spark import RAW_SCHEMA, raw_rows

    df = raw_rows()
    df.loc[4, "value"] = -2.0
    with pytest.raises(ContractViolation, match=r"value\.range"):
        validate(
            spark.createDataFrame(df, RAW_SCHEMA),
            "raw_metrics",
            batch_id="sp-1",
            quarantine_root=tmp_path / "q",
            gx_project=tmp_path / "gx",
            labels={"job": "demo"},
        )
    (rec,) = read_batches(tmp_path / "gx", job="demo")
    assert rec.quarantined and rec.rows == len(df) and any("value.range" in e for e in rec.errors)
    # The GX part of a Spark batch (its first rows, as pandas) ran as the raw_metrics checkpoint.
    assert rec.data_docs_page and "sp-1" in rec.data_docs_page and Path(rec.data_docs_page).is_file()
    assert GxProject(tmp_path / "gx").data_docs_index.is_file()
