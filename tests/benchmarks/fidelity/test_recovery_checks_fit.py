"""benchmarks/fidelity/recovery_checks_fit.py: the shipped backlog ceiling is the best of the values tried on the
real ADS profiling runs, and the script names a folder it cannot read."""

from __future__ import annotations

from importlib import resources
from pathlib import Path

import pandas as pd
import pytest

from benchmarks.fidelity.recovery_checks_fit import fit_table, lag_series, main
from flinktune.twin.profile import ClusterProfile
from flinktune.twin.recovery_checks import DEMETER_CHECKS
from tests.benchmarks.ads_folder import ADS_DATA

ADS = ClusterProfile.from_yaml(Path(str(resources.files("flinktune") / "resources" / "cluster_profile_ads.yaml")))


def test_the_shipped_ceiling_reads_the_real_runs_best() -> None:
    if not (ADS_DATA / "profiling_runs.csv").exists():
        pytest.skip(f"real data not found at {ADS_DATA}")
    runs = pd.read_csv(ADS_DATA / "profiling_runs.csv").dropna(subset=["recovery_s"]).reset_index(drop=True)
    table = fit_table(runs, lag_series(ADS, runs)).set_index("backlog_s")
    shipped, unbounded = table.loc[DEMETER_CHECKS.backlog_s], table.loc[float("inf")]
    assert shipped["class_right"] == table["class_right"].max()
    assert shipped["class_right"] >= unbounded["class_right"] + 0.01, table["class_right"].to_dict()

    def twin_share(cell: str) -> float:
        return float(cell.split(" / ")[0])

    # The runs with a 90 s checkpoint interval that kept up recovered slowly two times in three: the
    # ceiling is what brings the twin's reading of them nearer (no ceiling: a third).
    measured = float(shipped["slow_kept_up_90s"].split(" / ")[1].split(" ")[0])
    assert abs(twin_share(shipped["slow_kept_up_90s"]) - measured) < abs(twin_share(unbounded["slow_kept_up_90s"]) - measured)


def test_a_folder_without_profiling_runs_is_named(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["--data", str(tmp_path)])
    assert f"{tmp_path / 'profiling_runs.csv'} not found" in capsys.readouterr().err
    pd.DataFrame({"parallelism": [4], "input_rate": [1.0]}).to_csv(tmp_path / "profiling_runs.csv", index=False)
    with pytest.raises(SystemExit):
        main(["--data", str(tmp_path)])
    assert "missing columns task_slots, cpu, memory_mb, checkpoint_interval_s, throughput, recovery_s" in capsys.readouterr().err
