"""The twin's planted hot key and slow TaskManager: off by default, effective when planted, persisted."""

import numpy as np
import pandas as pd
import pytest

from flinktune.config_space import Configuration
from flinktune.twin import ClusterProfile, TwinJob
from flinktune.twin.imbalance import Imbalance, ImbalanceError

CFG = Configuration(8, 2, 2.0, 4096, 30)
RATES = np.full(120, 30000.0)


def _busy(df: pd.DataFrame) -> pd.DataFrame:
    return df[df["metric"] == "busyTimeMsPerSecond"].groupby(["vertex", "subtask"])["value"].mean().unstack()


@pytest.mark.parametrize("detail", ["vertex", "subtask"])
def test_default_and_inactive_imbalance_leave_output_identical(detail):
    base = TwinJob(ClusterProfile.default(), CFG, seed=5, detail=detail, failures="every:1m").run(RATES)
    inactive = TwinJob(ClusterProfile.default(), CFG, seed=5, detail=detail, failures="every:1m", imbalance=Imbalance()).run(
        RATES
    )
    pd.testing.assert_frame_equal(base, inactive)
    assert "imbalance" not in TwinJob(ClusterProfile.default(), CFG, imbalance=Imbalance()).state_dict()


def test_hot_key_loads_one_subtask_and_more_parallelism_does_not_remove_it():
    prof = ClusterProfile.default("tsw")
    imb = Imbalance(hot_vertex="window", hot_key_share=0.4, hot_subtask=3)
    caps = {}
    for p in (8, 16, 24):
        twin = TwinJob(prof, Configuration(p, 2, 2.0, 4096, 30), detail="subtask", seed=0, imbalance=imb)
        df = twin.run(np.full(60, 20000.0))
        caps[p] = float(twin.history()["capacity"].iloc[-1])
        rec = df[(df["metric"] == "numRecordsInPerSecond") & (df["vertex"] == "window")].groupby("subtask")["value"].mean()
        assert rec.idxmax() == 3 and rec[3] / rec.drop(3).median() > 1 + 0.4 * p / 0.6 - 0.01
    balanced = {p: TwinJob(prof, Configuration(p, 2, 2.0, 4096, 30)).steady_state(rate=0.0)["capacity"] for p in (8, 24)}
    assert balanced[24] > 2.5 * balanced[8]  # a balanced job scales ...
    assert caps[24] < 1.15 * caps[8]  # ... the hot key caps it


def test_slow_taskmanager_slows_its_subtasks_and_caps_capacity():
    imb = Imbalance(slow_taskmanager=1, slow_speed=0.5)
    twin = TwinJob(ClusterProfile.default(), CFG, detail="subtask", seed=0, imbalance=imb)
    busy = _busy(twin.run(RATES))
    on_slow = busy[[2, 3]].mean(axis=1)  # TaskManager 1 holds slots 2 and 3
    others = busy.drop(columns=[2, 3]).mean(axis=1)
    assert (on_slow["source"] / others["source"]) == pytest.approx(2.0, rel=0.01)
    fast = TwinJob(ClusterProfile.default(), CFG, seed=0)
    fast.run(np.zeros(1))
    assert twin.history()["capacity"].iloc[-1] == pytest.approx(fast.history()["capacity"].iloc[-1] / 2.0, rel=1e-6)
    # A slow TaskManager the configuration does not use has no effect.
    gone = TwinJob(
        ClusterProfile.default(), CFG, detail="subtask", seed=0, imbalance=Imbalance(slow_taskmanager=9, slow_speed=0.5)
    )
    base = TwinJob(ClusterProfile.default(), CFG, detail="subtask", seed=0)
    assert gone.run(RATES)["value"].sum() == pytest.approx(base.run(RATES)["value"].sum())


def test_vertex_detail_reports_the_busiest_subtask_and_summed_records():
    imb = Imbalance(hot_vertex="window", hot_key_share=0.3, hot_subtask=1)
    sub = TwinJob(ClusterProfile.default(), CFG, detail="subtask", seed=0, imbalance=imb).run(RATES)
    ver = TwinJob(ClusterProfile.default(), CFG, detail="vertex", seed=0, imbalance=imb).run(RATES)
    w_sub, w_ver = sub[sub["vertex"] == "window"], ver[ver["vertex"] == "window"]
    busy = lambda d: d[d["metric"] == "busyTimeMsPerSecond"].groupby("subtask")["value"].mean()  # noqa: E731
    rec = lambda d: d[d["metric"] == "numRecordsInPerSecond"]["value"].sum()  # noqa: E731
    assert busy(w_ver).iloc[0] == pytest.approx(busy(w_sub).max()) and rec(w_ver) == pytest.approx(rec(w_sub))


def test_imbalance_survives_save_and_load(tmp_path):
    imb = Imbalance(hot_vertex="window", hot_key_share=0.3, slow_taskmanager=0, slow_speed=0.6, metric_noise=0.05)
    a = TwinJob(ClusterProfile.default(), CFG, detail="subtask", seed=2, imbalance=imb)
    a.run(RATES[:60])
    b = TwinJob.load(a.save(tmp_path / "twin.json"))
    assert b.imbalance == imb
    pd.testing.assert_frame_equal(a.run(RATES[:30]), b.run(RATES[:30]))


def test_bad_imbalance_is_named():
    with pytest.raises(ImbalanceError, match="hot_vertex 'source' is not a keyed"):
        TwinJob(ClusterProfile.default(), CFG, imbalance=Imbalance(hot_vertex="source", hot_key_share=0.2))
    with pytest.raises(ImbalanceError, match="hot_key_share must be in"):
        Imbalance(hot_vertex="window", hot_key_share=1.5)
    with pytest.raises(ImbalanceError, match="slow_speed must be in"):
        Imbalance(slow_taskmanager=0, slow_speed=0.0)
    with pytest.raises(ImbalanceError, match="needs hot_vertex"):
        Imbalance(hot_key_share=0.2)
    with pytest.raises(ImbalanceError, match=r"twin state 'imbalance': unknown key\(s\) \['hot'\]"):
        Imbalance.from_dict({"hot": 1}, "twin state 'imbalance'")
