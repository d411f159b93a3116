"""The latency cap on utilization: fitted per shape from steady windows, applied to sizing, said in the reason."""

from __future__ import annotations

import pandas as pd
import pytest

from flinktune.config_space import Configuration, default_space
from flinktune.decision import Action, JobState, VertexMetrics
from flinktune.decision.stages import PolicyContext
from flinktune.decision.testing import FunctionSurrogate, StaticForecaster
from flinktune.policies import make_policy
from flinktune.tuner.capacity import shape_of
from flinktune.tuner.latency import LatencyCurves

SPACE = default_space()
SHAPE = (2, 2.0, 2048, 10)


def queueing(u: float, base: float = 300.0, slope: float = 100.0) -> float:
    return base + slope * u / (1 - u)


def test_the_cap_is_the_utilization_where_the_fitted_latency_meets_the_margin():
    curves = LatencyCurves()
    for u in (0.2, 0.35, 0.5, 0.6, 0.7):
        curves.observe(SHAPE, u, queueing(u))
    # 0.85 x 600 = 510 ms: 300 + 100 x / (1 - x) = 510 -> x/(1-x) = 2.1 -> 0.677
    cap = curves.cap(SHAPE, 600.0, 0.85)
    assert cap.utilization == pytest.approx(2.1 / 3.1, abs=1e-6)
    assert "5 windows at 20%-70%" in cap.reason and "510 ms (85% of the target)" in cap.reason
    assert curves.cap(SHAPE, 5000.0, 0.85).utilization > 0.9  # a loose target barely caps
    assert curves.cap(SHAPE, 300.0, 0.85).utilization == curves.floor  # over the limit even idle: the floor
    assert "even idle" in curves.cap(SHAPE, 300.0, 0.85).reason
    assert curves.cap((4, 2.0, 3072, 10), 600.0, 0.85).utilization is None  # never pooled across shapes


def test_no_cap_without_enough_points_spread_or_slope():
    few = LatencyCurves()
    for u in (0.3, 0.5, 0.7):
        few.observe(SHAPE, u, queueing(u))
    assert few.cap(SHAPE, 600.0, 0.85).utilization is None and "4 needed" in few.cap(SHAPE, 600.0, 0.85).reason
    narrow = LatencyCurves()
    for u in (0.50, 0.52, 0.55, 0.57):
        narrow.observe(SHAPE, u, queueing(u))
    assert narrow.cap(SHAPE, 600.0, 0.85).utilization is None and "between 50% and 57%" in narrow.cap(SHAPE, 600.0, 0.85).reason
    flat = LatencyCurves()
    for u in (0.2, 0.4, 0.6, 0.7):
        flat.observe(SHAPE, u, 400.0)
    assert flat.cap(SHAPE, 300.0, 0.85).utilization is None  # latency does not rise with load: not a load problem
    junk = LatencyCurves()
    for u, ms in ((0.0, 300.0), (1.2, 300.0), (0.5, float("nan")), (0.5, -1.0)):
        junk.observe(SHAPE, u, ms)
    assert junk.points == {}


def test_curves_survive_the_policy_memory_round_trip():
    curves = LatencyCurves()
    for u in (0.2, 0.35, 0.5, 0.6):
        curves.observe(SHAPE, u, queueing(u))
    back = LatencyCurves().restore(curves.to_dict())
    assert back.cap(SHAPE, 600.0, 0.85) == curves.cap(SHAPE, 600.0, 0.85)


def _window(config: Configuration, rate: float, capacity: float, p95: float, ts: float, restarts: int = 0) -> JobState:
    busy = rate / capacity  # the window vertex sees half the records and is the tightest (capacity = rate / busy)
    verts = (
        VertexMetrics("Source: ads", 8, rate, rate, busy / 4, 0.0, rate / (busy / 4)),
        VertexMetrics("window", 8, rate / 2, rate / 2, busy, 0.0, (rate / 2) / busy),
    )
    return JobState("j", ts, config, True, rate, rate, 0.0, 0.0, p95, 4, 4000, busy, 0.0, 300, True, (), verts,
                    restarts=restarts)  # fmt: skip


def _ctx(level: float, target_ms: float) -> PolicyContext:
    return PolicyContext(latency_target_ms=target_ms, recovery_limit_s=180.0,
                         forecast=StaticForecaster(level, spread=0.0).predict(pd.Series(dtype=float), 600),
                         surrogate=FunctionSurrogate(SPACE), profiled_max_rate=1e6)  # fmt: skip


def _policy_after_windows(target_ms: float, failing: bool = False):
    pol = make_policy("flinktune", SPACE, down_horizon_s=300, min_dwell_s=0, up_trigger=0.75)
    cfg = Configuration(16, 2, 2.0, 2048, 10)
    pol.shape = shape_of(cfg)
    capacity = 80000.0
    for i, u in enumerate((0.2, 0.3, 0.4, 0.5)):  # the load rises through the afternoon; the forecast follows
        pol.decide(
            _window(cfg, u * capacity, capacity, queueing(u), ts=300.0 * i, restarts=int(failing)), _ctx(u * capacity, target_ms)
        )
    return pol, cfg, capacity


def test_sizing_honours_the_latency_target_and_says_so():
    loose, cfg, capacity = _policy_after_windows(target_ms=2000.0)
    rate = 0.6 * capacity  # fits 75 % of the running size: nothing to do at a loose target
    keep = loose.decide(_window(cfg, 0.5 * capacity, capacity, queueing(0.5), ts=1500.0), _ctx(rate, 2000.0))
    assert keep.action is Action.KEEP and "capped" not in keep.reason
    tight, cfg, capacity = _policy_after_windows(target_ms=500.0)
    # 0.85 x 500 = 425 ms -> u/(1-u) = 1.25 -> utilization 56 %: 48,000 rec/s needs a larger size
    up = tight.decide(_window(cfg, 0.5 * capacity, capacity, queueing(0.5), ts=1500.0), _ctx(rate, 500.0))
    assert up.action is Action.RECONFIGURE and up.target.parallelism > cfg.parallelism
    assert shape_of(up.target) == shape_of(cfg)
    assert "[utilization capped at 56% (not 75%) by latency: p95 ~ 300 ms + 100 ms x u/(1-u)" in up.reason
    assert up.inputs["latency_cap"] == pytest.approx(1.25 / 2.25, abs=0.005)
    assert "latency" in tight.memory() and tight.memory()["latency"][0]["shape"] == list(shape_of(cfg))


def test_failure_windows_do_not_feed_the_curve():
    pol, _cfg, _ = _policy_after_windows(target_ms=500.0, failing=True)
    assert pol.latency.points == {}
