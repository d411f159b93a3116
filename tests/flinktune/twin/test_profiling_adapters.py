"""Profiling runs, the initial design and the twin's stage adapters."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from flinktune.config_space import ConfigSpace, Configuration
from flinktune.decision.reconfig import ReconfigMode
from flinktune.decision.stages import MetricsSource
from flinktune.lake import Lake
from flinktune.metrics.schema import PROFILING_COLUMNS
from flinktune.twin.adapters import TwinMetricsSource, TwinRealizer
from flinktune.twin.profile import ClusterProfile
from flinktune.twin.profiling import initial_design, profile_configs, recovery_time
from flinktune.twin.simulator import TwinJob

PROFILE = ClusterProfile.default()
SPACE = ConfigSpace()


def test_profile_configs_table() -> None:
    cfgs = [SPACE.maximum, Configuration(8, 1, 1.0, 1024, 50)]
    df = profile_configs(PROFILE, cfgs, [20_000, 70_000], duration_s=120, seed=1, job="pj")
    assert list(df.columns) == list(PROFILING_COLUMNS) and len(df) == 4
    assert df["run_id"].is_unique and (df["job"] == "pj").all()
    by = df.set_index(["parallelism", "input_rate"]).sort_index()
    small_hi = df[(df["parallelism"] == 8) & (df["input_rate"] > 60_000)].iloc[0]
    big_hi = df[(df["parallelism"] == 24) & (df["input_rate"] > 60_000)].iloc[0]
    # The small job cannot keep up at 70k: lower throughput, worse latency, no recovery.
    assert small_hi["throughput"] < 0.9 * small_hi["input_rate"] and big_hi["throughput"] == pytest.approx(
        big_hi["input_rate"], rel=0.01
    )
    assert small_hi["latency_ms"] > 5 * big_hi["latency_ms"] and small_hi["recovery_s"] == 600.0
    assert (by["cpu_used"] > 0).all() and (by["memory_used_mb"] > 0).all()
    again = profile_configs(PROFILE, cfgs, [20_000, 70_000], duration_s=120, seed=1, job="pj")
    pd.testing.assert_frame_equal(df, again)


def test_profiling_errors_are_clear() -> None:
    with pytest.raises(ValueError, match="at least one configuration"):
        profile_configs(PROFILE, [], [1.0])
    with pytest.raises(ValueError, match="duration_s must be >= 60"):
        profile_configs(PROFILE, [SPACE.maximum], [1.0], duration_s=10)


def test_recovery_time_waits_for_a_stable_return() -> None:
    lag = np.zeros(200)
    lag[50:90] = 1e6  # failure at 50, back at 90
    lag[100:105] = 1e6  # relapse: the stable stretch starts at 105
    assert recovery_time(lag, 50, rate=1000.0) == 55.0
    assert recovery_time(np.arange(200) * 2000.0, 50, rate=1000.0, cap_s=600) == 600.0  # overloaded: lag keeps growing


def test_initial_design_is_spread_out_and_includes_the_max() -> None:
    design = initial_design(SPACE, 8, seed=3)
    assert design[0] == SPACE.maximum and len(set(design)) == 8 and all(SPACE.contains(c) for c in design)
    X = np.array([SPACE.normalise(c) for c in design])
    d = np.linalg.norm(X[:, None] - X[None], axis=-1)[np.triu_indices(8, 1)]
    rng = np.random.default_rng(0)
    cands = SPACE.candidates()
    rand = np.array([SPACE.normalise(cands[i]) for i in rng.choice(len(cands), 8, replace=False)])
    dr = np.linalg.norm(rand[:, None] - rand[None], axis=-1)[np.triu_indices(8, 1)]
    assert d.min() > dr.min()
    assert initial_design(SPACE, 8, seed=3) == design


def test_realizer_applies_and_reports_mode_and_downtime() -> None:
    twin = TwinJob(PROFILE, SPACE.maximum, job="internal")
    realizer = TwinRealizer(twin, job="demo")
    assert callable(realizer.current) and callable(realizer.apply)  # Realizer is not runtime-checkable
    assert realizer.apply("demo", SPACE.maximum).changed is False
    res = realizer.apply("demo", SPACE.maximum.with_(parallelism=20))
    assert res.changed and res.mode is ReconfigMode.IN_PLACE and res.downtime_s > 0 and "p24" in res.detail
    res = realizer.apply("demo", SPACE.maximum.with_(parallelism=20, cpu=2.0))
    assert res.mode is ReconfigMode.REDEPLOY and realizer.current("demo").cpu == 2.0
    with pytest.raises(KeyError, match="'other'"):
        realizer.current("other")


def test_metrics_source_over_twin_and_lake(tmp_path) -> None:
    twin = TwinJob(PROFILE, SPACE.maximum, job="demo", retain_s=60)
    frames = [twin.run(np.full(100, 30_000.0)) for _ in range(3)]
    src = TwinMetricsSource(twin)
    assert isinstance(src, MetricsSource)
    t0 = twin.start_ts * 1000
    got = src.fetch("demo", t0 + 250_000, t0 + 260_000)
    assert sorted(got["ts_ms"].unique()) == list(range(t0 + 250_000, t0 + 260_000, 1000))
    assert src.fetch("demo", t0, t0 + 100_000).empty  # older than retain_s: dropped
    lake = Lake(tmp_path / "lake")
    lake.write_raw(pd.concat(frames, ignore_index=True))
    from_lake = TwinMetricsSource(lake=lake).fetch("demo", t0 + 250_000, t0 + 260_000)
    pd.testing.assert_frame_equal(
        from_lake.sort_values(["ts_ms", "metric", "vertex"]).reset_index(drop=True),
        got.sort_values(["ts_ms", "metric", "vertex"]).reset_index(drop=True),
    )
    with pytest.raises(ValueError, match="exactly one"):
        TwinMetricsSource()


def test_twin_realizer_keeps_the_realizer_contract() -> None:
    from stage_contracts import check_realizer

    from flinktune.clock import ManualClock
    from flinktune.twin.backend import twin_backend

    twin = TwinJob(PROFILE, SPACE.maximum, job="demo")
    check_realizer(
        TwinRealizer(twin), "demo", SPACE.maximum.with_(parallelism=16), SPACE.maximum.with_(parallelism=16, task_slots=2)
    )
    # The backend's one in-place rule says what the realizer does.
    backend = twin_backend(twin, ManualClock(twin.now))
    before = twin.config
    for target in (before, before.with_(parallelism=20), before.with_(cpu=1.0)):
        assert backend.mode_for(before, target) is backend.realizer.apply("demo", target).mode
        before = target
