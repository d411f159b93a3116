"""The flinktune policy: shape once, in-place parallelism moves on measured capacity, late scale-downs."""

import numpy as np
import pandas as pd
import pytest

from flinktune.config_space import Configuration, default_space
from flinktune.decision import Action, JobState, VertexMetrics
from flinktune.evaluation import evaluate
from flinktune.policies import make_policy
from flinktune.policies.capacity import CapacityModel, measured_capacity, shape_of
from flinktune.stages import PolicyContext
from flinktune.testing import FunctionSurrogate, StaticForecaster
from flinktune.twin.profile import ClusterProfile
from flinktune.twin.simulator import TwinJob

SPACE = default_space()


def vertices(rate: float, busy: float) -> tuple[VertexMetrics, ...]:
    # a source and a heavier window vertex seeing half the records
    return (
        VertexMetrics("Source: ads", 8, rate, rate, busy / 4, 0.0, rate / (busy / 4)),
        VertexMetrics("window", 8, rate / 2, rate / 2, busy, 0.0, (rate / 2) / busy),
    )


def state(config, rate=20000.0, busy=0.5, ts=0.0, restarts=0, p95=150.0):
    return JobState("j", ts, config, True, rate, rate, 0.0, 0.0, p95, 4, 4000, busy, 0.0, 300, True, (),
                    vertices(rate, busy) if busy > 0 else (), restarts=restarts)  # fmt: skip


def ctx(level):
    return PolicyContext(latency_target_ms=250.0, recovery_limit_s=180.0,
                         forecast=StaticForecaster(level, spread=0.0).predict(pd.Series(dtype=float), 600),
                         surrogate=FunctionSurrogate(SPACE), extras={"profiled_max_rate": 1e6})  # fmt: skip


def test_measured_capacity_is_the_tightest_vertex_in_job_input_terms():
    st = state(Configuration(8, 1, 1.0, 2048, 10), rate=20000, busy=0.5)
    # window: true rate 20000 rec/s of its own input = 40000 rec/s of job input; source: 160000
    assert measured_capacity(st) == pytest.approx(40000)
    assert measured_capacity(state(st.config, restarts=1)) is None  # a failure in the window: not steady
    assert measured_capacity(state(st.config, busy=0.0)) is None  # no per-vertex metrics


def test_capacity_model_extrapolates_sublinearly_up_and_linearly_down():
    m = CapacityModel(up_exponent=0.85, smoothing=0.5)
    assert m.estimate(12) is None
    m.observe(12, 60000)
    m.observe(12, 40000)
    assert m.estimate(12) == pytest.approx(50000)
    assert m.estimate(24) == pytest.approx(50000 * 2**0.85)
    assert m.estimate(8) == pytest.approx(50000 * 8 / 12)


def test_shape_once_then_in_place_scaling_with_dwell_before_scale_down():
    pol = make_policy("flinktune", SPACE, memory_headroom=0.7, utilization=0.65, min_dwell_s=1200, down_horizon_s=1800)
    first = pol.decide(state(SPACE.maximum, rate=30000, ts=0), ctx(30000))
    assert first.action is Action.RECONFIGURE and "shape" in first.reason
    shape = shape_of(first.target)
    cfg = first.target
    # measured: capacity 40000 at this parallelism -> 35000 rec/s needs more (0.65 x 40000 = 26000)
    up = pol.decide(state(cfg, rate=20000, busy=0.5, ts=300), ctx(35000))
    assert up.action is Action.RECONFIGURE and shape_of(up.target) == shape and up.target.parallelism > cfg.parallelism
    assert "in-place" in up.reason
    bigger = up.target
    # the load drops at once: the sustained (last 30 min) plan still holds the larger size
    hold = pol.decide(state(bigger, rate=5000, busy=0.0625 * 8 / bigger.parallelism, ts=600), ctx(5000))
    assert hold.action is Action.KEEP
    # after the horizon and the dwell time the scale-down happens, in place
    pol.decide(state(bigger, rate=5000, busy=0.0625 * 8 / bigger.parallelism, ts=1500), ctx(5000))
    down = pol.decide(state(bigger, rate=5000, busy=0.0625 * 8 / bigger.parallelism, ts=2500), ctx(5000))
    assert down.action is Action.RECONFIGURE and shape_of(down.target) == shape
    assert down.target.parallelism < bigger.parallelism and "scale down" in down.reason


def test_a_failure_window_does_not_feed_the_capacity_model():
    pol = make_policy("flinktune", SPACE, memory_headroom=0.7)
    cfg = pol.decide(state(SPACE.maximum, rate=30000), ctx(30000)).target
    pol.decide(state(cfg, rate=20000, busy=0.99, ts=300, restarts=1, p95=9000), ctx(20000))
    assert pol.capacity.measured == {}


def test_evaluate_counts_restarts_from_a_real_twin():
    twin = TwinJob(ClusterProfile.default("ysb"), SPACE.maximum, job="j", seed=1, failures="every:3m", retain_s=400)
    twin.run(np.full(300, 20000.0))
    now = twin.now
    st = evaluate("j", twin.samples(int((now - 300) * 1000), int(now * 1000) + 1), twin.config, now, window_s=300, max_staleness_s=300)
    assert st.restarts >= 1
    twin2 = TwinJob(ClusterProfile.default("ysb"), SPACE.maximum, job="j", seed=1, failures="none", retain_s=400)
    twin2.run(np.full(300, 20000.0))
    now = twin2.now
    st2 = evaluate("j", twin2.samples(int((now - 300) * 1000), int(now * 1000) + 1), twin2.config, now, window_s=300, max_staleness_s=300)
    assert st2.restarts == 0


def test_a_fresh_policy_adopts_the_running_shape_instead_of_redeploying():
    running = Configuration(12, 2, 2.0, 2048, 10)
    pol = make_policy("flinktune", SPACE, memory_headroom=0.7)
    d = pol.decide(state(running, rate=20000, busy=0.5), ctx(20000))
    assert pol.shape == shape_of(running)
    assert d.action is Action.KEEP or shape_of(d.target) == shape_of(running)
