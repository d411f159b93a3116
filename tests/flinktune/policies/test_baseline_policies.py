"""Each baseline policy's published behaviour, on the twin where it needs true rates."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from flinktune.config_space import default_space
from flinktune.decision import Action, JobState, VertexMetrics
from flinktune.decision.evaluation import evaluate
from flinktune.decision.stages import PolicyContext
from flinktune.decision.testing import StaticForecaster
from flinktune.policies import POLICY_NAMES, make_policy
from flinktune.twin import ClusterProfile, TwinJob
from flinktune.twin.mechanics import layout

SPACE = default_space()
MAX = SPACE.maximum
CTX = PolicyContext(latency_target_ms=1000.0, recovery_limit_s=180.0)


def twin_state(twin: TwinJob, seconds: int, rate: float) -> JobState:
    twin.run(np.full(seconds, rate))
    return evaluate("demo", twin.samples(), twin.config, twin.now, window_s=seconds)


def state(config=MAX, *, rate=40000.0, cpu=8.0, mem=8000.0, busy=0.5, lag=0.0, growth=0.0, ts=0.0, vertices=()):
    return JobState("j", ts, config, True, rate, rate, lag, growth, 300.0, cpu, mem, busy, 0.0, 60, vertices=vertices)


def test_every_published_policy_is_registered():
    assert set(POLICY_NAMES) == {"static", "demeter", "flinktune", "reactive", "ds2", "autoscaler", "sage", "barre", "oracle"}
    with pytest.raises(ValueError, match="schedule="):
        make_policy("oracle", SPACE)


def test_ds2_reaches_the_right_parallelism_in_at_most_three_steps():
    prof = ClusterProfile.default("ysb")  # the source vertex is the known bottleneck
    rate = 45000.0
    right = min(p for p in SPACE.parallelism if layout(prof, MAX.with_(parallelism=p)).base_capacity >= rate)
    twin, pol = TwinJob(prof, MAX, seed=3), make_policy("ds2", SPACE, per_vertex=False)
    steps = []
    for _ in range(3):
        d = pol.decide(twin_state(twin, 180, rate), CTX)
        steps.append(d)
        if d.action is Action.KEEP:
            break
        twin.apply(d.target)
    assert steps[-1].action is Action.KEEP, [s.reason for s in steps]
    assert twin.config.parallelism == right < MAX.parallelism
    assert "true processing rates" in steps[0].reason


def test_ds2_sizes_each_vertex_from_its_own_true_rate():
    twin = TwinJob(ClusterProfile.default("ysb"), MAX, seed=1)
    d = make_policy("ds2", SPACE).decide(twin_state(twin, 120, 40000.0), CTX)
    need = d.inputs["vertex_need"]
    assert need["source"] > need["lookup"] > need["sink"] >= 1  # the bottleneck needs the most instances
    assert d.target.vertex_overrides().get("sink") == need["sink"]


def _vertices(tpr_source: float, p: int = 24, rate: float = 40000.0):
    return (VertexMetrics("source", p, rate, rate, rate / tpr_source, 0.0, tpr_source),)


def test_autoscaler_waits_for_stabilization_and_a_full_window_then_scales_up_at_once():
    pol = make_policy("autoscaler", SPACE)
    # true rate 45k for a 40k target: util 0.89 < 1.0 upper bound -> keep; 35k: util > 1 -> scale up
    for t in range(0, 1260, 60):
        d = pol.decide(state(ts=float(t), vertices=_vertices(45000.0)), CTX)
    assert d.action is Action.KEEP and "within the utilisation bounds" in d.reason
    pol2 = make_policy("autoscaler", SPACE)
    p12 = MAX.with_(parallelism=12)
    out = [pol2.decide(state(p12, ts=float(t), vertices=_vertices(35000.0, p=12)), CTX) for t in range(0, 1260, 60)]
    assert out[0].reason.startswith("stabilizing") and any(d.reason.startswith("collecting metrics") for d in out)
    # capacity 0 + 40k x 300/1800 + 40k / 0.7 = 63.8k -> p ceil(12 x 63.8 / 35) = 22 -> grid 24
    assert out[-1].action is Action.RECONFIGURE and out[-1].target.parallelism == 24


def test_autoscaler_delays_scale_down_for_the_scale_down_interval():
    pol = make_policy("autoscaler", SPACE)
    times = range(0, 3600 + 1260, 60)
    out = [pol.decide(state(ts=float(t), vertices=_vertices(400000.0)), CTX) for t in times]
    delayed = [t for t, d in zip(times, out) if "delayed" in d.reason]
    assert delayed and all(d.action is Action.KEEP for d in out if "delayed" in d.reason)
    changes = [(t, d) for t, d in zip(times, out) if d.action is Action.RECONFIGURE]
    assert changes and changes[0][1].target.parallelism < 24
    assert changes[0][0] - delayed[0] >= 3600  # recommended for the whole scale-down interval first


def test_reactive_follows_the_hpa_formula_with_tolerance_and_scale_down_stabilization():
    pol = make_policy("reactive", SPACE)
    up = pol.decide(state(MAX.with_(parallelism=12), cpu=12 * 0.95), CTX)  # 12 x 0.95 / 0.7 = 16.3 -> 17 -> p20
    assert up.target.parallelism == 20 and up.inputs["desired_replicas"] == 17
    assert pol.decide(state(MAX, cpu=24 * 0.74), CTX).action is Action.KEEP  # within the 0.1 tolerance
    pol = make_policy("reactive", SPACE)
    pol.decide(state(MAX, cpu=24 * 0.7, ts=0.0), CTX)
    assert pol.decide(state(MAX, cpu=24 * 0.2, ts=120.0), CTX).action is Action.KEEP  # 24 recommended 120 s ago
    assert pol.decide(state(MAX, cpu=24 * 0.2, ts=420.0), CTX).target.parallelism == 8


def test_sage_orders_memory_then_cpu_then_parallelism_and_one_scale_down_per_resource():
    pol = make_policy("sage", SPACE)
    both = pol.decide(state(MAX.with_(memory_mb=2048), mem=0.9 * 24 * 2048, cpu=0.9 * 24), CTX)
    assert both.target == MAX.with_(memory_mb=3072) and "memory_mb up" in both.reason
    first = pol.decide(state(MAX, mem=1000.0, cpu=12.0, ts=0.0), CTX)
    assert first.target.memory_mb == 3072
    second = pol.decide(state(first.target, mem=1000.0, cpu=3.0, ts=600.0), CTX)  # memory has not settled: CPU is next
    assert "cpu down" in second.reason or "parallelism down" in second.reason or second.action is Action.KEEP
    assert second.action is Action.KEEP or second.target.memory_mb == 3072


def test_barre_reserves_for_the_forecast_burst():
    twin = TwinJob(ClusterProfile.default("ysb"), MAX, seed=2)
    st = twin_state(twin, 120, 30000.0)
    calm = PolicyContext(1000.0, 180.0, forecast=StaticForecaster(30000.0, spread=0.01).predict(pd.Series(dtype=float), 600))
    bursty = PolicyContext(1000.0, 180.0, forecast=StaticForecaster(30000.0, spread=0.5).predict(pd.Series(dtype=float), 600))
    pol = make_policy("barre", SPACE)
    a, b = pol.decide(st, calm), pol.decide(st, bursty)
    assert a.target.total_cpu < b.target.total_cpu <= MAX.total_cpu
    assert b.inputs["burst_reserve"] == pytest.approx(30000.0) and "burst" in b.reason
    assert pol.decide(st, CTX).action is Action.KEEP  # no forecast: hold and say so


def test_oracle_follows_its_schedule():
    from flinktune.twin.oracle import oracle_schedule

    idx = pd.date_range("2024-01-01", periods=1200, freq="1s", tz="UTC")
    trace = pd.Series(np.r_[np.full(600, 20000.0), np.full(600, 80000.0)], index=idx)
    sched = oracle_schedule(ClusterProfile.default("ysb"), trace, SPACE, 1000.0, 180.0, 600)
    pol = make_policy("oracle", SPACE, schedule=sched)
    lo = pol.decide(state(ts=idx[0].timestamp()), CTX).target
    hi = pol.decide(state(ts=idx[600].timestamp()), CTX).target
    assert lo.total_cpu < hi.total_cpu


def _three(src_tpr: float, sink_tpr: float, p: int = 24, rate: float = 40000.0):
    return (
        VertexMetrics("source", p, rate, rate, rate / src_tpr, 0.0, src_tpr),
        VertexMetrics("sink", p, rate, rate, rate / sink_tpr, 0.0, sink_tpr),
    )


def test_autoscaler_applies_the_utilisation_bounds_to_the_changed_vertices_together():
    # Source 50 % busy at 40k (true rate 80k): inside its own bounds [40k, 106.7k], yet its target
    # parallelism ceil(24 x 63.8k / 80k) = 20 differs from 24. The sink is nearly idle (outside).
    # Published (ScalingExecutor.allChangedVerticesWithinUtilizationTarget): once any changed vertex
    # is outside, every changed vertex is rescaled, the source included, after its 1 h delay.
    pol = make_policy("autoscaler", SPACE)
    times = range(0, 1200 + 3600 + 120, 60)
    out = [pol.decide(state(ts=float(t), vertices=_three(80000.0, 4_000_000.0)), CTX) for t in times]
    change = next(d for d in out if d.action is Action.RECONFIGURE)
    assert change.target.parallelism == 20  # the source's 20 sets the job (and TaskManagers); old code kept 24
    assert change.target.vertex_overrides()["sink"] < 20
    # Both inside their bounds: no rescale at all, however different the target parallelism.
    pol = make_policy("autoscaler", SPACE)
    out = [pol.decide(state(ts=float(t), vertices=_three(80000.0, 90000.0)), CTX) for t in times]
    assert all(d.action is Action.KEEP for d in out)
    assert "within the utilisation bounds" in out[-1].reason


def test_autoscaler_clears_a_vertexs_pending_scale_down_when_it_is_back_at_target():
    pol = make_policy("autoscaler", SPACE)
    for t in range(0, 1200 + 1800, 60):  # 30 min of a pending scale-down
        pol.decide(state(ts=float(t), vertices=_vertices(400000.0)), CTX)
    # 15 min with the source at its target (ceil(24 x 63.8k / 64k) = 24): the pending request is cleared.
    for t in range(3000, 3960, 60):
        pol.decide(state(ts=float(t), vertices=_vertices(64000.0)), CTX)
    later = [pol.decide(state(ts=float(t), vertices=_vertices(400000.0)), CTX) for t in range(3960, 3960 + 3000, 60)]
    assert all(d.action is Action.KEEP for d in later)  # a new hour starts: not the first request's
