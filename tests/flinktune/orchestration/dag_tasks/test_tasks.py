"""The task bodies the train and report DAGs call: real jobs on the twin under the environment's settings."""

from pathlib import Path

import pytest

from flinktune.orchestration.dag_tasks import tasks
from flinktune.settings import load_settings
from jobs import simulate


@pytest.fixture
def var_dir(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    monkeypatch.setenv("FLINKTUNE_VAR_DIR", str(tmp_path / "var"))
    return tmp_path / "var"


def test_profiling_on_the_twin_writes_the_startup_design_for_the_job(var_dir: Path) -> None:
    simulate.run(job="demo", hours=0.5, settings=load_settings())
    out = tasks.profile_on_twin("demo")
    assert out["rows"] > 0 and Path(out["path"]).is_relative_to(
        var_dir / "lake" / "curated" / "profiling_observations" / "job=demo"
    )


def test_profiling_on_a_real_cluster_skips_with_its_reason_and_writes_nothing(
    monkeypatch: pytest.MonkeyPatch, var_dir: Path
) -> None:
    from airflow.sdk.exceptions import AirflowSkipException

    monkeypatch.setenv("FLINKTUNE_CLUSTER", "kubernetes")
    with pytest.raises(AirflowSkipException, match=r"^real cluster: profiling runs through the flinktune_profile DAG"):
        tasks.profile_on_twin("demo")
    assert not (var_dir / "lake").exists()


def test_the_report_task_reads_the_environments_lake(var_dir: Path) -> None:
    with pytest.raises(FileNotFoundError, match=r"no curated features for job 'demo' under .*var/lake/curated/features_1m"):
        tasks.report("demo")
