"""Planted bottleneck, hot key and slow TaskManager: the analysis must name each first (>= 95 % of seeds)."""

import json

import numpy as np
import pandas as pd
import pytest

from flinktune.analysis import KEY_SKEW, SLOW_WORKER, analyse
from flinktune.config_space import Configuration
from flinktune.decision import Action, Decision
from flinktune.decision.evaluation import evaluate
from flinktune.decision.explain import annotate, explain
from flinktune.twin import ClusterProfile, TwinJob
from flinktune.twin.imbalance import Imbalance

SEEDS = range(40)
CONFIGS = [(8, 1, 1.0), (8, 2, 2.0), (12, 2, 2.0), (12, 4, 3.0), (16, 2, 2.0), (16, 4, 3.0)]


def _config(rng: np.random.Generator) -> Configuration:
    p, slots, cpu = CONFIGS[int(rng.integers(len(CONFIGS)))]
    return Configuration(p, slots, cpu, 4096, 30)


def _run(profile: ClusterProfile, cfg: Configuration, imb: Imbalance, rng: np.random.Generator, seed: int) -> pd.DataFrame:
    twin = TwinJob(profile, cfg, detail="subtask", seed=seed, imbalance=imb)
    twin.run(np.zeros(1))
    cap = float(twin.history()["capacity"].iloc[-1])
    load = float(rng.uniform(0.5, 1.3))  # from half loaded to overloaded
    return twin.run(np.full(90, load * cap))


def _assert_normalised(a) -> None:
    for scores in (a.operators, a.subtasks, a.edges, a.workers):
        assert sum(scores.values()) == pytest.approx(1.0) and min(scores.values()) >= 0


def test_planted_bottleneck_operator_is_named_first():
    hits = 0
    for seed in SEEDS:
        rng = np.random.default_rng(seed)
        heavy = int(rng.integers(4))
        vertices = [
            {
                "name": f"op{k}",
                "partitioning": "forward" if k == 0 else "hash" if k == 2 else "rebalance",
                "cost_us": float(rng.uniform(150, 250) if k == heavy else rng.uniform(20, 60)),
            }
            for k in range(4)
        ]
        profile = ClusterProfile.default().with_(dataflow={"name": "planted", "vertices": vertices})
        a = analyse(_run(profile, _config(rng), Imbalance(metric_noise=0.05), rng, seed), task_slots=2)
        _assert_normalised(a)
        hits += a.bottleneck == f"op{heavy}" and max(a.operators, key=a.operators.get) == f"op{heavy}"
    assert hits >= 0.95 * len(SEEDS), f"bottleneck named first in {hits}/{len(SEEDS)} runs"


def test_planted_hot_key_is_named_first_and_scaling_is_refused():
    hits = 0
    profile = ClusterProfile.default("tsw")
    for seed in SEEDS:
        rng = np.random.default_rng(1000 + seed)
        cfg = _config(rng)
        hot = int(rng.integers(cfg.parallelism))
        imb = Imbalance(hot_vertex="window", hot_key_share=float(rng.uniform(0.15, 0.5)), hot_subtask=hot, metric_noise=0.05)
        a = analyse(_run(profile, cfg, imb, rng, seed), task_slots=cfg.task_slots)
        _assert_normalised(a)
        s = a.stragglers[0] if a.stragglers else None
        hits += (
            s is not None
            and (s.vertex, s.subtask) == ("window", hot)
            and s.cause == KEY_SKEW
            and a.top_subtask == ("window", hot)
            and a.scaling == "no"
            and a.prefers_no_change
        )
    assert hits >= 0.95 * len(SEEDS), f"hot key named first in {hits}/{len(SEEDS)} runs"


def test_planted_slow_taskmanager_is_named_first():
    hits = 0
    profile = ClusterProfile.default("ysb")
    for seed in SEEDS:
        rng = np.random.default_rng(2000 + seed)
        cfg = _config(rng)
        slow = int(rng.integers(cfg.taskmanagers))
        imb = Imbalance(slow_taskmanager=slow, slow_speed=float(rng.uniform(0.35, 0.65)), metric_noise=0.05)
        a = analyse(_run(profile, cfg, imb, rng, seed), task_slots=cfg.task_slots)
        _assert_normalised(a)
        top_worker = max(a.workers, key=a.workers.get)
        s = a.stragglers[0] if a.stragglers else None
        hits += (
            a.slow_workers[:1] == (slow,)
            and top_worker == slow
            and s is not None
            and s.worker == slow
            and s.cause == SLOW_WORKER
            and a.scaling == "partly"
        )
    assert hits >= 0.95 * len(SEEDS), f"slow TaskManager named first in {hits}/{len(SEEDS)} runs"


def test_balanced_job_has_no_stragglers_and_even_siblings():
    cfg = Configuration(8, 2, 2.0, 4096, 30)
    df = TwinJob(ClusterProfile.default(), cfg, detail="subtask", seed=3).run(np.full(60, 20000.0))
    a = analyse(df, task_slots=2)
    assert a.stragglers == () and a.slow_workers == () and a.bottleneck == "source"
    src = [a.subtasks[("source", j)] for j in range(8)]
    assert max(src) == pytest.approx(min(src))  # ties share the chain evenly
    assert a.workers == pytest.approx({w: 0.25 for w in range(4)})
    assert a.scaling == "not needed" and "bottleneck: source" in explain(a)


def test_backpressure_names_the_hot_channel_into_the_bottleneck():
    vertices = [
        {"name": "src", "cost_us": 20.0},
        {"name": "heavy", "partitioning": "rebalance", "cost_us": 200.0},
        {"name": "out", "partitioning": "hash", "cost_us": 10.0},
    ]
    profile = ClusterProfile.default().with_(dataflow={"name": "bp", "vertices": vertices})
    twin = TwinJob(profile, Configuration(8, 2, 2.0, 4096, 30), detail="subtask", seed=0)
    a = analyse(twin.run(np.full(60, 1e6)), task_slots=2)  # far over capacity: upstream blocks
    assert a.saturated and a.bottleneck == "heavy" and a.edge_basis == "backpressure"
    assert a.hot_channel == ("src", "heavy") and a.edges[("src", "heavy")] == pytest.approx(1.0)
    assert a.scaling == "yes" and "hot channel src->heavy" in explain(a)


def test_forward_edges_keep_lanes_and_vertex_level_samples_still_rank_operators():
    cfg = Configuration(8, 2, 2.0, 4096, 30)
    imb = Imbalance(slow_taskmanager=1, slow_speed=0.5)
    df = TwinJob(ClusterProfile.default(), cfg, detail="subtask", seed=0, imbalance=imb).run(np.full(60, 20000.0))
    lanes = analyse(df, task_slots=2, forward_edges=[("window", "sink")])
    assert sum(lanes.subtasks.values()) == pytest.approx(1.0) and lanes.top_subtask[1] in (2, 3)
    vertex_level = TwinJob(ClusterProfile.default(), cfg, seed=0).run(np.full(60, 20000.0))
    a = analyse(vertex_level, task_slots=2)
    assert not a.per_subtask and a.bottleneck == "source" and a.workers == {} and a.stragglers == ()
    assert sum(a.operators.values()) == pytest.approx(1.0)


def test_nothing_busy_or_no_vertex_metrics_gives_none():
    cfg = Configuration(8, 2, 2.0, 4096, 30)
    idle = TwinJob(ClusterProfile.default(), cfg, detail="subtask", seed=0).run(np.zeros(30))
    assert analyse(idle, task_slots=2) is None
    assert analyse(idle[idle["vertex"] == ""], task_slots=2) is None
    assert explain(None).startswith("bottleneck: unknown")


def test_evaluate_attaches_analysis_and_annotation_quotes_it_without_changing_the_decision():
    cfg = Configuration(8, 2, 2.0, 4096, 30)
    twin = TwinJob(
        ClusterProfile.default("tsw"),
        cfg,
        detail="subtask",
        seed=0,
        imbalance=Imbalance(hot_vertex="window", hot_key_share=0.4, hot_subtask=2),
    )
    df = twin.run(np.full(120, 40000.0))
    state = evaluate("demo", df, cfg, now=twin.now, window_s=120)
    assert state.analysis is not None and state.analysis.prefers_no_change
    json.dumps(state.to_dict())  # the store persists it
    # Holding a scale-up on skew is the guard's rule now (tests/flinktune/decision/test_guard.py): annotate only quotes.
    up = Decision(Action.RECONFIGURE, "latency above target", "ds2", target=Configuration(16, 2, 2.0, 4096, 30))
    quoted = annotate(up, state)
    assert quoted.action is Action.RECONFIGURE and quoted.target == up.target and "key skew on window[2]" in quoted.reason
    down = Decision(Action.RECONFIGURE, "over-provisioned", "ds2", target=Configuration(4, 2, 2.0, 4096, 30))
    kept = annotate(down, state)
    assert kept.action is Action.RECONFIGURE and kept.reason.startswith("over-provisioned | bottleneck: window")
    assert kept.inputs["bottleneck"]["bottleneck"] == "window"
