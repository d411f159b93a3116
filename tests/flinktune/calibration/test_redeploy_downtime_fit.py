"""The redeploy's downtime fitted on the backlog after measured operator rescales (flinktune.calibration.redeploy_downtime)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from flinktune.calibration.folder import calibrate_beside
from flinktune.calibration.grey_box import GreyBoxTwin
from flinktune.calibration.redeploy_downtime import (
    calibrate_downtime,
    calibrate_downtime_on_folder,
    redeploy_backlogs,
    twin_redeploy_backlog,
)
from flinktune.calibration.redeploy_warmup import calibrate_redeploy, twin_redeploy_cost
from flinktune.config_space import Configuration
from flinktune.twin import mechanics as mech
from flinktune.twin.profile import ClusterProfile

SHAPE = Configuration(parallelism=8, task_slots=1, cpu=1.0, memory_mb=2048, checkpoint_interval_s=10)
BASE = ClusterProfile.default("ysb")
MOVES = [(8, 6, 0.5), (7, 4, 0.45), (6, 5, 0.6), (8, 5, 0.4), (4, 6, 0.5)]


def _rate(profile: ClusterProfile, tms: int, share: float) -> float:
    return share * float(mech.capacity(mech.layout(profile, SHAPE.with_(parallelism=tms)), np.ones(1))[0])


def _measured_runs(truth: ClusterProfile, partitions: int) -> list[pd.DataFrame]:
    """Per-minute operator runs, one a rescale of :data:`MOVES`, whose backlog after it is the twin's under
    ``truth``, recorded as one partition's lag (the whole backlog / ``partitions``, as demeter-ads records it)."""
    runs = []
    for a, b, share in MOVES:
        rate = _rate(truth, min(a, b), share)
        backlog = twin_redeploy_backlog(truth, SHAPE, a, b, rate)
        rows = [(a, rate, 0.0, 500.0)] * 4  # task_managers, throughput, consumer_lag, latency
        rows.append(((a + b) / 2.0, rate, backlog[0] * rate / partitions, 900.0))  # the redeploy's partial minute
        rows += [(b, rate, v * rate / partitions, 2000.0) for v in backlog[1:]]
        rows += [(b, rate, 0.0, 500.0)] * 4
        df = pd.DataFrame(rows, columns=["task_managers", "throughput", "consumer_lag", "latency"])
        runs.append(df.assign(timestamp=np.arange(len(df)) * 60))
    return runs


def test_backlogs_are_read_in_seconds_of_input_and_in_the_operators_unit():
    df = pd.DataFrame(
        {
            "timestamp": np.arange(8) * 60,
            "latency": 500.0,
            "task_managers": [6, 6, 6, 5.2, 4, 4, 4, 4],
            "throughput": 1000.0,
            "consumer_lag": [0, 0, 0, 10, 300, 100, 0, 0],
        }
    )
    one, many = redeploy_backlogs(df), redeploy_backlogs(df, lag_scale=8.0)
    assert len(one) == 1 and (one.loc[0, "tm_before"], one.loc[0, "tm_after"]) == (6, 4)
    assert one.loc[0, ["backlog_0", "backlog_1", "backlog_2", "backlog_3"]].tolist() == pytest.approx([0.01, 0.3, 0.1, 0.0])
    assert many.loc[0, "backlog_1"] == pytest.approx(8 * 0.3)
    with pytest.raises(ValueError, match="lag_scale"):
        redeploy_backlogs(df, lag_scale=0.0)
    with pytest.raises(ValueError, match="consumer_lag"):
        redeploy_backlogs(df.drop(columns=["consumer_lag"]))


def test_a_longer_downtime_leaves_more_backlog_a_minute_in():
    rate = _rate(BASE, 4, 0.5)
    short = twin_redeploy_backlog(BASE.with_(redeploy_base_s=10.0), SHAPE, 6, 4, rate)
    long = twin_redeploy_backlog(BASE.with_(redeploy_base_s=60.0), SHAPE, 6, 4, rate)
    assert long[1] > short[1] + 20.0  # ~50 s more of input held back


def test_a_known_redeploy_downtime_is_recovered_from_a_measured_folder(tmp_path):
    truth = BASE.with_(redeploy_base_s=55.0)
    (tmp_path / "measured_60s").mkdir()
    for i, run in enumerate(_measured_runs(truth, partitions=8)):
        run.to_csv(tmp_path / "measured_60s" / f"{i}_operator35_ADS.csv", index=False)
    cal = calibrate_downtime_on_folder(tmp_path, BASE, SHAPE)  # lag x 8: the shape's parallelism
    assert cal.redeploy_base_s == pytest.approx(55.0, abs=2.0) and cal.episodes == 4  # the scale-downs
    assert cal.profile.redeploy_base_s == pytest.approx(55.0, abs=2.0)
    assert cal.twin_backlog_s_before[1] < cal.measured_backlog_s[1]  # the default 25 s stops too briefly
    assert cal.twin_backlog_s_after[1] == pytest.approx(cal.measured_backlog_s[1], abs=1.0)
    assert cal.profile.redeploy_warmup_s == BASE.redeploy_warmup_s and cal.profile.savepoint_base_s == BASE.savepoint_base_s
    assert "1 scale-ups (not fitted)" in cal.note and "lag x 8" in cal.note
    # The lag read as one partition's (x 1) is 8x too small: the fit lands far lower.
    raw = calibrate_downtime_on_folder(tmp_path, BASE, SHAPE, partitions=1)
    assert raw.redeploy_base_s is not None and raw.redeploy_base_s < 40.0


def test_another_methods_changes_are_fitted_on_its_own_files(tmp_path):
    truth = BASE.with_(redeploy_base_s=30.0)
    (tmp_path / "measured_60s").mkdir()
    for i, run in enumerate(_measured_runs(truth, partitions=8)):
        run.to_csv(tmp_path / "measured_60s" / f"{i}_demeter_ADS.csv", index=False)
    assert "no measured operator run" in calibrate_downtime_on_folder(tmp_path, BASE, SHAPE).note
    cal = calibrate_downtime_on_folder(tmp_path, BASE, SHAPE, method="demeter")
    assert cal.redeploy_base_s == pytest.approx(30.0, abs=2.0) and "4 demeter scale-downs" in cal.note
    assert "no measured reactive run" in calibrate_downtime_on_folder(tmp_path, BASE, SHAPE, method="reactive").note
    for bad in ("", " ", "*", "../demeter", "demeter,"):
        with pytest.raises(ValueError, match="method must name measured methods"):
            calibrate_downtime_on_folder(tmp_path, BASE, SHAPE, method=bad)
    # Two methods' savepoint redeploys pooled: every scale-down counts once.
    for i, run in enumerate(_measured_runs(truth, partitions=8)[:2]):
        run.to_csv(tmp_path / "measured_60s" / f"{i}_operator35_ADS.csv", index=False)
    pooled = calibrate_downtime_on_folder(tmp_path, BASE, SHAPE, method="operator,demeter")
    assert pooled.redeploy_base_s == pytest.approx(30.0, abs=2.0) and "6 operator,demeter scale-downs" in pooled.note


def test_no_operator_run_or_no_scale_down_gives_a_note_and_leaves_the_profile(tmp_path):
    none = calibrate_downtime_on_folder(tmp_path, BASE, SHAPE)
    assert none.profile == BASE and none.redeploy_base_s is None and "not calibrated: no measured operator run" in none.note
    up = pd.DataFrame([{"tm_before": 4, "tm_after": 6, "rate": _rate(BASE, 4, 0.5), **{f"backlog_{k}": 1.0 for k in range(4)}}])
    cal = calibrate_downtime(BASE, SHAPE, up)
    assert cal.profile == BASE and "no usable operator scale-down" in cal.note
    with pytest.raises(ValueError, match="backlog_1"):
        calibrate_downtime(BASE, SHAPE, up.drop(columns=["backlog_1"]))


def test_the_folder_sequence_notes_the_downtime_term(tmp_path):
    twin = GreyBoxTwin(BASE, {"x": 1.0}, 100.0, 360.0, 180.0, 240, {"marker": object()})
    for way in ("backlog", "downtime"):
        on = calibrate_beside(tmp_path, twin, pd.DataFrame(), BASE, SHAPE, redeploy_fit=way)
        assert "not calibrated: no measured operator run" in on.notes["downtime"] and on.twin.profile == BASE
        assert "not calibrated: no measured operator run" in on.notes["redeploy"]
    off = calibrate_beside(tmp_path, twin, pd.DataFrame(), BASE, SHAPE, redeploy_fit="latency")
    assert "not calibrated (redeploy fit 'latency')" in off.notes["downtime"]
    with pytest.raises(ValueError, match="redeploy_fit"):
        calibrate_beside(tmp_path, twin, pd.DataFrame(), BASE, SHAPE, redeploy_fit="nope")


def test_downtime_and_warmup_both_on_the_backlog_are_recovered(tmp_path):
    truth = BASE.with_(redeploy_base_s=50.0, redeploy_warmup_s=90.0)
    (tmp_path / "measured_60s").mkdir()
    for i, run in enumerate(_measured_runs(truth, partitions=8)):
        run.to_csv(tmp_path / "measured_60s" / f"{i}_operator35_ADS.csv", index=False)
    cal = calibrate_downtime_on_folder(tmp_path, BASE, SHAPE, warmup_on_backlog=True)
    assert cal.redeploy_base_s == pytest.approx(50.0, abs=3.0) and cal.redeploy_warmup_s == pytest.approx(90.0, abs=10.0)
    assert cal.profile.redeploy_warmup_s == pytest.approx(90.0, abs=10.0)
    assert cal.twin_backlog_s_after[2] == pytest.approx(cal.measured_backlog_s[2], abs=1.0)
    only = calibrate_downtime_on_folder(tmp_path, BASE, SHAPE)  # the warm-up held at the default 20 s
    assert only.redeploy_warmup_s is None and only.profile.redeploy_warmup_s == BASE.redeploy_warmup_s


def test_the_warmup_read_per_minute_leaves_out_the_seconds_the_job_is_down():
    long = BASE.with_(redeploy_base_s=60.0, redeploy_warmup_s=30.0)
    rate = _rate(long, 4, 0.5)
    every_second = twin_redeploy_cost(long, SHAPE, 6, 4, rate)
    per_minute = twin_redeploy_cost(long, SHAPE, 6, 4, rate, per_minute=True)
    assert 0 < per_minute < every_second
    # A known warm-up behind a long downtime is recovered from per-minute costs read the same way.
    moves = [(8, 6, 0.5), (7, 4, 0.45), (6, 5, 0.6)]
    rows = [
        {
            "tm_before": a,
            "tm_after": b,
            "rate": (r := _rate(long, min(a, b), s)),
            "cost_s2": twin_redeploy_cost(long, SHAPE, a, b, r, per_minute=True),
        }
        for a, b, s in moves
    ]
    cal = calibrate_redeploy(BASE.with_(redeploy_base_s=60.0), SHAPE, pd.DataFrame(rows), per_minute=True)
    assert cal.redeploy_warmup_s == pytest.approx(30.0, abs=3.0) and "per minute" in cal.note


def test_the_folder_sequence_pools_demeters_redeploys_by_default(tmp_path):
    truth = BASE.with_(redeploy_base_s=40.0)
    (tmp_path / "measured_60s").mkdir()
    for i, run in enumerate(_measured_runs(truth, partitions=8)):
        run.to_csv(tmp_path / "measured_60s" / f"{i}_demeter_ADS.csv", index=False)
    twin = GreyBoxTwin(BASE, {"x": 1.0}, 100.0, 360.0, 180.0, 240, {"marker": object()})
    # Demeter's runs alone: the default pool (operator and Demeter) fits on them; the operator's alone cannot.
    pooled = calibrate_beside(tmp_path, twin, pd.DataFrame(), BASE, SHAPE, redeploy_fit="downtime")
    assert pooled.twin.profile.redeploy_base_s == pytest.approx(40.0, abs=3.0)
    assert "4 operator,demeter scale-downs" in pooled.notes["downtime"]  # of 5 moves, one a scale-up
    alone = calibrate_beside(tmp_path, twin, pd.DataFrame(), BASE, SHAPE, redeploy_fit="downtime", redeploy_methods="operator")
    assert alone.twin.profile == BASE and "no measured operator run" in alone.notes["downtime"]
