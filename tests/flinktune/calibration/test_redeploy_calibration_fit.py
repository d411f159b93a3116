"""The twin's warm-up after a savepoint redeploy, fitted on measured operator rescales."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from flinktune.calibration.redeploy_warmup import calibrate_redeploy, calibrate_redeploy_on_folder, twin_redeploy_cost
from flinktune.config_space import Configuration
from flinktune.twin import mechanics as mech
from flinktune.twin.profile import ClusterProfile
from flinktune.twin.simulator import TwinJob

SHAPE = Configuration(parallelism=8, task_slots=1, cpu=1.0, memory_mb=2048, checkpoint_interval_s=10)
BASE = ClusterProfile.default("ysb")


def _episodes(truth: ClusterProfile, moves: list[tuple[int, int, float]]) -> pd.DataFrame:
    rows = []
    for a, b, share in moves:
        rate = share * float(mech.capacity(mech.layout(truth, SHAPE.with_(parallelism=min(a, b))), np.ones(1))[0])
        rows.append({"tm_before": a, "tm_after": b, "rate": rate, "cost_s2": twin_redeploy_cost(truth, SHAPE, a, b, rate)})
    return pd.DataFrame(rows)


def test_a_known_redeploy_warmup_is_recovered_and_failures_keep_theirs():
    truth = BASE.with_(redeploy_warmup_s=90.0)
    eps = _episodes(truth, [(8, 6, 0.5), (7, 4, 0.4), (6, 5, 0.6), (4, 6, 0.5)])
    cal = calibrate_redeploy(BASE, SHAPE, eps)
    assert cal.redeploy_warmup_s == pytest.approx(90.0, abs=3.0) and cal.episodes == 3  # scale-downs only
    assert cal.twin_cost_s2_before < cal.measured_cost_s2  # the default 20 s warm-up costs less
    assert cal.profile.warmup_s == BASE.warmup_s and cal.profile.rescale_warmup_s == BASE.rescale_warmup_s
    assert "1 scale-ups (not fitted)" in cal.note


def test_only_a_redeploy_uses_the_redeploy_warmup():
    slow = BASE.with_(redeploy_warmup_s=120.0, adaptive_scheduler=True)
    fast = BASE.with_(adaptive_scheduler=True)
    lost = {}
    for name, prof in (("slow", slow), ("fast", fast)):
        for mode in ("rescale", "redeploy"):
            job = TwinJob(prof.with_(latency_noise=0.0), SHAPE)
            job.run(np.full(30, 20000.0), emit=False)
            job.apply(SHAPE.with_(parallelism=6), mode=mode)
            job.run(np.full(300, 20000.0), emit=False)
            lost[name, mode] = float(job.history()["latency_p50_ms"].sum())
    assert lost["slow", "rescale"] == pytest.approx(lost["fast", "rescale"])
    assert lost["slow", "redeploy"] > lost["fast", "redeploy"]


def test_no_operator_run_or_no_scale_down_leaves_the_profile(tmp_path):
    none = calibrate_redeploy_on_folder(tmp_path, BASE, SHAPE)
    assert none.profile == BASE and none.redeploy_warmup_s is None and "no measured operator run" in none.note
    ups = _episodes(BASE, [(4, 6, 0.5)])
    cal = calibrate_redeploy(BASE, SHAPE, ups)
    assert cal.profile == BASE and "no usable operator scale-down" in cal.note
    with pytest.raises(ValueError, match="cost_s2"):
        calibrate_redeploy(BASE, SHAPE, ups.drop(columns=["cost_s2"]))
