"""Cluster profile and job descriptions: defaults, YAML round trip, errors naming file and key."""

from __future__ import annotations

import pytest

from flinktune.twin.dataflow import DataflowError, builtin_dataflow, load_dataflow
from flinktune.twin.profile import ClusterProfile, ProfileError


def test_every_field_has_a_default_and_a_description() -> None:
    for name, info in ClusterProfile.model_fields.items():
        assert info.description, name
        assert not info.is_required(), name


def test_shipped_yaml_is_the_model_default() -> None:
    assert ClusterProfile.default() == ClusterProfile()
    assert ClusterProfile.default("tsw").dataflow.name == "tsw"


def test_yaml_round_trip(tmp_path) -> None:
    prof = ClusterProfile.default("tsw").with_(queue_ms=77.0, adaptive_scheduler=False)
    path = prof.to_yaml(tmp_path / "p.yaml")
    assert "# Queueing scale" in path.read_text()
    assert ClusterProfile.from_yaml(path) == prof
    assert not list(tmp_path.glob(".*.tmp"))


def test_unknown_key_names_key_and_file(tmp_path) -> None:
    f = tmp_path / "bad.yaml"
    f.write_text("queue_ms: 10\nqueu_ms: 20\n")
    with pytest.raises(ProfileError) as err:
        ClusterProfile.from_yaml(f)
    assert str(f) in str(err.value) and "'queu_ms'" in str(err.value)


def test_invalid_value_names_key_and_file(tmp_path) -> None:
    f = tmp_path / "bad.yaml"
    f.write_text("restore_mb_s: -3\n")
    with pytest.raises(ProfileError, match=r"bad\.yaml: key 'restore_mb_s'"):
        ClusterProfile.from_yaml(f)


def test_job_yaml_relative_to_profile_and_its_errors(tmp_path) -> None:
    (tmp_path / "job.yaml").write_text(
        "name: two\nvertices:\n  - {name: src, cost_us: 10}\n  - {name: agg, partitioning: hash, cost_us: 20, state_mb: 5}\n"
    )
    (tmp_path / "p.yaml").write_text("dataflow: job.yaml\n")
    prof = ClusterProfile.from_yaml(tmp_path / "p.yaml")
    assert prof.dataflow.vertex_names == ("src", "agg")
    (tmp_path / "job.yaml").write_text("name: two\nvertices:\n  - {name: src, cost_us: 10, colour: red}\n")
    with pytest.raises(ProfileError, match=r"key 'dataflow'.*job\.yaml: key 'vertices\.0\.colour'"):
        ClusterProfile.from_yaml(tmp_path / "p.yaml")


def test_builtin_jobs() -> None:
    ysb = builtin_dataflow("ysb")
    assert ysb.vertex_names == ("source", "lookup", "window", "sink")
    assert ysb.input_share()[1] == pytest.approx(0.33)
    assert builtin_dataflow("tsw").state_mb_at(100_000) > builtin_dataflow("tsw").state_mb_at(10_000)
    with pytest.raises(DataflowError, match="'wordcount'"):
        builtin_dataflow("wordcount")


def test_duplicate_vertex_names_rejected(tmp_path) -> None:
    f = tmp_path / "dup.yaml"
    f.write_text("name: d\nvertices:\n  - {name: a, cost_us: 1}\n  - {name: a, cost_us: 2}\n")
    with pytest.raises(DataflowError, match=r"dup\.yaml.*duplicate vertex name"):
        load_dataflow(f)
