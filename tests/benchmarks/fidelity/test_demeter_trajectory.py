"""benchmarks/fidelity/demeter_trajectory.py: the measured side on the real runs, and the default taken from the folder's space."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

from benchmarks.fidelity.demeter_trajectory import (
    _row,
    at_default_by_rate,
    decision_path,
    elevated_minutes_per_change,
    main,
    measured_trajectory,
    twin_configs,
    twin_cpu_per_tm_away,
    twin_shapes,
)
from flinktune.config_space import Configuration
from tests.benchmarks.ads_folder import ADS_DATA as DATA
from tests.benchmarks.ads_folder import ads_slice


def test_measured_trajectory_of_the_real_runs() -> None:
    if not (DATA / "profiling_runs.csv").exists():
        pytest.skip(f"real data not found at {DATA}")
    t = measured_trajectory(DATA).set_index("run")
    # Read by hand from measured_60s/*_demeter_*.csv.
    assert t["at_default"].round(2).tolist() == [0.61, 0.55, 0.29]
    assert t["returns"].tolist() == [10, 8, 10] and t["changes"].tolist() == [30, 33, 52]
    # A change costs Demeter's latency 1.2-1.7 minutes over 3x the median, the operator's 3.6-3.8.
    assert t["elevated_per_change"].round(2).tolist() == [1.17, 1.3, 1.69]
    # Away from the default the real runs reserved 0.60-0.78 of its cores, 1.4-2.0 a
    # TaskManager, and 0.18-0.27 of its memory (summary_per_run.csv's means, read as a blend).
    assert t["cpu_away"].round(2).tolist() == [0.78, 0.61, 0.6]
    assert t["memory_away"].round(2).tolist() == [0.27, 0.18, 0.24]
    assert t["cpu_per_tm_away"].round(1).tolist() == [1.8, 2.0, 1.4]
    # The first move away from the default came at minutes 102-110 (the one-minute dips at
    # minutes 45-46 and 90-92 are failures' partitioned TaskManagers, no move), and the time at the
    # default lies at the high rates: the trace's upper two rate quartiles hold most of it.
    assert t["first_move_min"].tolist() == [107.0, 102.0, 110.0]
    assert t["default_q1"].round(2).tolist() == [0.25, 0.17, 0.17]
    assert t["default_q4"].round(2).tolist() == [0.9, 0.92, 0.51]
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


def test_the_time_at_the_default_is_split_by_rate_band() -> None:
    rate = np.array([10.0, 20.0, 30.0, 40.0, 50.0, 60.0])
    at = np.array([False, True, True, True, True, True])
    got = at_default_by_rate(rate, at, np.array([25.0, 45.0, 100.0]))
    assert got["default_q1"] == 0.5 and got["default_q2"] == 1.0 and got["default_q3"] == 1.0
    assert np.isnan(got["default_q4"])  # no minute above 100


def test_the_twins_row_dates_its_first_move_and_bands_its_minutes() -> None:
    mx = Configuration(parallelism=24, task_slots=1, cpu=1.0, memory_mb=4096, checkpoint_interval_s=10)
    small = Configuration(parallelism=12, task_slots=2, cpu=2.0, memory_mb=2048, checkpoint_interval_s=90)
    idx = pd.date_range("2026-01-01", periods=60, freq="1min")
    t0 = idx[0].timestamp()
    at_small = (idx >= idx[10]) & (idx < idx[40])
    minutes = pd.DataFrame(
        {
            "rate": np.where(np.arange(60) < 30, 1000.0, 5000.0),
            "latency_p95_ms": 100.0,
            "total_cpu": np.where(at_small, small.total_cpu, mx.total_cpu),
            "total_memory_mb": np.where(at_small, small.total_memory_mb, mx.total_memory_mb),
        },
        index=pd.Index(idx, name="ts"),
    )
    decisions = [
        {
            "ts": t0 + 300,
            "changed": True,
            "target": mx.to_dict(),
            "action": "reconfigure",
            "reason": "go to the maximum",
        },  # to the default: no move
        {"ts": t0 + 600, "changed": True, "target": small.to_dict(), "action": "reconfigure", "reason": "planned rate"},
        {"ts": t0 + 2400, "changed": True, "target": mx.to_dict(), "action": "reconfigure", "reason": "go to the maximum"},
    ]
    run = SimpleNamespace(minutes=minutes, decisions=decisions, summary={})
    row = _row(run, mx, np.array([3000.0]))
    assert row["first_move_min"] == 10.0
    # Minutes 0-29 at 1000 rec/s: 10 at the default of 30; minutes 30-59 at 5000: 20 of 30.
    assert abs(row["default_q1"] - 10 / 30) < 1e-12 and abs(row["default_q2"] - 20 / 30) < 1e-12
