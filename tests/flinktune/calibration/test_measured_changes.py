"""A measured method's configuration changes counted from its per-minute files (flinktune.calibration.measured_changes)."""

from __future__ import annotations

import os
from pathlib import Path

import pandas as pd
import pytest

from flinktune.calibration.measured_changes import count_changes, count_changes_on_folder

ADS = Path(
    os.environ.get("FLINKTUNE_DEMETER_ADS", Path(__file__).resolve().parents[3].parent / "shared" / "data" / "demeter-ads")
)
T0 = 1_700_000_000


def _minutes(tms: list[float], slots: list[float] | None = None) -> pd.DataFrame:
    return pd.DataFrame(
        {"timestamp": [T0 + 60 * i for i in range(len(tms))], "task_managers": tms, "task_slots": slots if slots else tms}
    )


def test_a_redeploy_back_to_the_same_count_a_resize_and_a_slot_change_count_once_each() -> None:
    tms = [24, 24, 15.28, 24, 24, 24, 20, 20, 20, 20]
    slots = [24, 24, 15.28, 24, 24, 24, 20, 20, 40, 40]
    assert count_changes(_minutes(tms, slots)) == 3
    # Consecutive fractional minutes are one change.
    assert count_changes(_minutes([24, 23.5, 11.2, 17.9, 24, 24])) == 1


def test_a_stretch_at_an_injection_is_the_failures_restart() -> None:
    tms = [24, 24, 23.7, 24, 24, 24, 24, 23.2, 24, 24]
    injections = [T0 + 60 * 2 - 30]  # 30 s before the first stretch; the second is 5.5 min after it
    assert count_changes(_minutes(tms), injections) == 1
    assert count_changes(_minutes(tms), injections, after_s=600) == 0
    assert count_changes(_minutes(tms)) == 2


def test_bad_input_is_named() -> None:
    with pytest.raises(ValueError, match=r"missing column\(s\) \['task_slots'\]"):
        count_changes(pd.DataFrame({"timestamp": [T0], "task_managers": [4]}))
    with pytest.raises(ValueError, match="before_s and after_s"):
        count_changes(_minutes([4, 4]), before_s=-1)
    # Unreadable minutes are left out, not counted as changes.
    assert count_changes(_minutes([4, "n/a", 4, 4])) == 0  # type: ignore[list-item]


def test_a_folder_without_the_method_or_with_a_bad_name_is_named(tmp_path: Path) -> None:
    (tmp_path / "measured_60s").mkdir()
    _minutes([4, 4, 2.5, 2, 2]).to_csv(tmp_path / "measured_60s" / "1_operator35_X.csv", index=False)
    got = count_changes_on_folder(tmp_path, "operator")
    assert got.counts == {"1_operator35_X": 1} and got.mean == 1.0
    assert got.per_hour == pytest.approx(12.0)  # one change in five minutes
    assert "no published count" in got.note
    with pytest.raises(ValueError, match="no per-minute files of method 'reactive'"):
        count_changes_on_folder(tmp_path, "reactive")
    with pytest.raises(ValueError, match="plain name"):
        count_changes_on_folder(tmp_path, "../x")


def test_on_the_real_runs_the_counter_agrees_with_demeters_published_counts() -> None:
    if not (ADS / "measured_60s").is_dir():
        pytest.skip(f"real measurements not found at {ADS}")
    demeter = count_changes_on_folder(ADS, "demeter")
    assert demeter.check, "the folder publishes Demeter's reconfigurations"
    for counted, published in demeter.check.values():
        assert abs(counted - published) <= max(2.0, 0.05 * published)
    assert count_changes_on_folder(ADS, "baseline").mean == 0.0  # static's stretches are all failures
    # The operator's savepoint upgrades, most of them back to 24 TaskManagers, are counted too.
    assert count_changes_on_folder(ADS, "operator").mean > demeter.mean
