"""benchmarks/demeter_trajectory.py: the measured side on the real runs, and the default taken from the folder's space."""

from __future__ import annotations

import os
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

from benchmarks.demeter_trajectory import (
    decision_path,
    elevated_minutes_per_change,
    main,
    measured_trajectory,
    twin_configs,
    twin_cpu_per_tm_away,
    twin_shapes,
)
from flinktune.config_space import Configuration
from tests.benchmarks.ads_folder import ads_slice

DATA = Path(
    os.environ.get("FLINKTUNE_DEMETER_ADS", Path(__file__).resolve().parents[2].parent / "shared" / "data" / "demeter-ads")
)


def test_measured_trajectory_of_the_real_runs() -> None:
    if not (DATA / "profiling_runs.csv").exists():
        pytest.skip(f"real data not found at {DATA}")
    t = measured_trajectory(DATA).set_index("run")
    # What session 14 read by hand from measured_60s/*_demeter_*.csv (docs/results/twin-fidelity-ads.md).
    assert t["at_default"].round(2).tolist() == [0.61, 0.55, 0.29]
    assert t["returns"].tolist() == [10, 8, 10] and t["changes"].tolist() == [30, 33, 52]
    # Session 18: a change costs Demeter's latency 1.2-1.7 minutes over 3x the median, the operator's 3.6-3.8.
    assert t["elevated_per_change"].round(2).tolist() == [1.17, 1.3, 1.69]
    # Session 22: away from the default the real runs reserved 0.60-0.78 of its cores, 1.4-2.0 a
    # TaskManager, and 0.18-0.27 of its memory (summary_per_run.csv's means, read as a blend).
    assert t["cpu_away"].round(2).tolist() == [0.78, 0.61, 0.6]
    assert t["memory_away"].round(2).tolist() == [0.27, 0.18, 0.24]
    assert t["cpu_per_tm_away"].round(1).tolist() == [1.8, 2.0, 1.4]
    op = measured_trajectory(DATA, "operator35")
    assert len(op) == 3 and (op["elevated_per_change"].between(3.5, 3.9)).all()


def test_elevated_minutes_count_the_high_minutes_around_each_change() -> None:
    lat = np.array([1.0] * 20)
    lat[[4, 5, 6, 15]] = 10.0  # over 3x the median (1.0)
    # change at 5: minutes 3..10 hold 4, 5, 6 -> 3; change at 16: minutes 14..21 hold 15 -> 1
    assert elevated_minutes_per_change(lat, np.array([5, 16])) == 2.0
    assert elevated_minutes_per_change(lat, np.array([0])) == 2.0  # cut at the start: minutes 0..5 hold 4, 5
    assert np.isnan(elevated_minutes_per_change(lat, np.array([], dtype=int)))


def test_the_default_is_the_folders_largest_configuration(tmp_path: Path) -> None:
    # A job profiled up to parallelism 8: its maximum (the space's rule: most parallelism, one slot per
    # TaskManager) is 8 TaskManagers x 1 slot, so the default is 8x1, not 24x1.
    runs = pd.DataFrame({"run": [1, 1], "parallelism": [4, 8], "task_slots": [1, 2], "cpu": [1.0, 2.0],
                         "memory_mb": [1024, 2048], "checkpoint_interval_s": [10, 10], "input_rate": [1e3, 1e3],
                         "throughput": [1e3, 1e3], "latency_ms": [900.0, 800.0], "recovery_s": [60.0, 50.0]})  # fmt: skip
    runs.to_csv(tmp_path / "profiling_runs.csv", index=False)
    (tmp_path / "measured_60s").mkdir()
    tms = [8, 8, 2, 2, 3.5, 8, 8, 2, 8]
    slots = [8, 8, 4, 4, 7, 8, 8, 4, 8]
    minutes = pd.DataFrame({"timestamp": range(len(tms)), "task_managers": tms, "task_slots": slots})
    minutes.to_csv(tmp_path / "measured_60s" / "1_demeter_X.csv", index=False)
    t = measured_trajectory(tmp_path)
    assert t["at_default"].iloc[0] == pytest.approx(5 / 9)
    assert t["returns"].iloc[0] == 2 and t["changes"].iloc[0] == 4  # 8x1 -> 2x2 -> 8x1 -> 2x2 -> 8x1 (3.5 left out)


@pytest.mark.parametrize(
    ("decision", "path"),
    [
        ({"action": "profile", "reason": "the target rate chunk ..."}, "profile"),
        ({"action": "reconfigure", "reason": "current latency is bad: fallback to the default"}, "fallback"),
        (
            {"action": "reconfigure", "reason": "no configuration meets the goals at 40,000 rec/s: go to the maximum"},
            "no_feasible",
        ),
        ({"action": "reconfigure", "reason": "the feasible candidate with the lowest usage"}, "switch"),
        ({"action": "keep", "reason": "collecting"}, "other"),
    ],
)
def test_decision_path_reads_the_policys_wording(decision: dict, path: str) -> None:
    assert decision_path(decision) == path


def test_redeploy_fit_names_a_folder_without_the_methods_runs(tmp_path: Path, capsys) -> None:
    # The slice has no measured_60s: the twin's own values are printed, and the note says
    # that the method's own changes could not be fitted (the real fit is in twin-fidelity-ads.md).
    assert main(["--data", str(ads_slice(tmp_path, hours=1)), "--redeploy-fit"]) == 0
    out = capsys.readouterr().out
    assert "the twin's (fitted on the pooled scale-downs): redeploy_base_s" in out and "no measured demeter run" in out


def test_the_twins_configurations_are_timed_from_its_changes() -> None:
    mx = Configuration(parallelism=24, task_slots=1, cpu=1.0, memory_mb=4096, checkpoint_interval_s=10)
    small = Configuration(parallelism=12, task_slots=2, cpu=2.0, memory_mb=2048, checkpoint_interval_s=90)
    minutes = pd.DataFrame(index=pd.date_range("2026-01-01", periods=60, freq="1min"))
    t0 = minutes.index[0].timestamp()
    decisions = [
        {"ts": t0 + 600, "changed": True, "target": small.to_dict()},  # 10 minutes at the default, then 30 small
        {"ts": t0 + 900, "changed": False, "target": None},  # a profiling decision: no change
        {"ts": t0 + 2400, "changed": True, "target": mx.to_dict()},  # back for the last 20
    ]
    run = SimpleNamespace(minutes=minutes, decisions=decisions)
    spent = twin_configs(run, mx)
    assert spent[mx] == 30.0 and spent[small] == 30.0
    assert twin_cpu_per_tm_away(run, mx) == 2.0  # 6 TaskManagers x 2 CPU
    assert twin_shapes(run, mx) == "24x1 1c4g 50%, 6x2 2c2g 50%"
