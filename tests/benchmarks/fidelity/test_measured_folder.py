"""benchmarks/fidelity/measured_folder.py: reconfigurations counted where the summary has none, the operator's reading spread fitted."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from benchmarks.fidelity.measured_folder import CalibratedTwin, fit_operator_noise, measured_table
from flinktune.config_space import default_space
from flinktune.policies.autoscaler import AutoscalerPolicy
from flinktune.replay.harness import ReplaySettings
from flinktune.twin.profile import ClusterProfile
from tests.benchmarks.ads_folder import ADS_DATA

T0 = 1_700_000_000


def _folder(tmp_path: Path, operator_tms: list[float] | None) -> Path:
    if not (ADS_DATA / "summary_by_method.csv").exists():
        pytest.skip(f"real data not found at {ADS_DATA}")
    for name in ("summary_by_method.csv", "summary_per_run.csv"):
        shutil.copy(ADS_DATA / name, tmp_path / name)
    (tmp_path / "measured_60s").mkdir()
    if operator_tms is not None:
        n = len(operator_tms)
        pd.DataFrame({"timestamp": T0 + 60 * np.arange(n), "task_managers": operator_tms, "task_slots": operator_tms}).to_csv(
            tmp_path / "measured_60s" / "1_operator35_X.csv", index=False
        )
    return tmp_path


def test_a_method_without_a_published_count_gets_its_files_count(tmp_path: Path) -> None:
    data = _folder(tmp_path, [24, 24, 17.5, 24, 24, 20, 20, 20])
    table = measured_table(data)
    assert table.loc["autoscaler", "reconfigurations"] == 2.0  # a redeploy back to 24, then a resize
    assert table.loc["demeter", "reconfigurations"] == 48.0  # published: kept
    assert np.isnan(table.loc["reactive", "reconfigurations"])  # no files, no count: "not measured"
    assert "operator: 2 changes counted" in table.attrs["changes_note"]


def test_the_operator_spread_is_fitted_on_its_measured_change_rate(tmp_path: Path) -> None:
    space = default_space()
    options = {"autoscaler": AutoscalerPolicy.published_options("demeter-1.6", space)}
    cal = CalibratedTwin(None, ClusterProfile.default("ysb"), options, {"busy": "busy time not calibrated"})
    trace = pd.Series(np.full(3600, 9000.0), index=pd.date_range("2026-01-01", periods=3600, freq="1s", tz="UTC"))
    st = ReplaySettings(workload="ysb", failures="none", seed=5, forecaster="naive")
    # A measured operator changing the job every fourth minute: the noisier spread comes closest.
    (tmp_path / "a").mkdir()
    busy = _folder(tmp_path / "a", [24.0, 24.0, 24.0, 23.5] * 15)
    got = fit_operator_noise(busy, cal, space, trace, st, workers=1, sigmas=(0.0, 0.5))
    assert got.options["autoscaler"]["busy_time_noise"] == 0.5
    assert "fitted on the measured operator's 15.00 changes per hour" in got.notes["busy"]
    # A folder without operator runs: the reading is left exact and the note says why.
    (tmp_path / "b").mkdir()
    none = fit_operator_noise(_folder(tmp_path / "b", None), cal, space, trace, st, workers=1)
    assert "busy_time_noise" not in none.options["autoscaler"] and "no measured operator runs" in none.notes["busy"]
