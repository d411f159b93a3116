"""Demeter's profiling thread (ANCHORS.md 1.5): the accepted suggestions and the round's budget."""

from __future__ import annotations

import pandas as pd

from flinktune.config_space import default_space
from flinktune.decision import JobState
from flinktune.policies.demeter_profiling import profiling_budget, profiling_candidates

SPACE = default_space()
MAX = SPACE.maximum


def _state(latency_ms: float) -> JobState:
    return JobState("j", 0.0, MAX, True, 20000.0, 20000.0, 0.0, 0.0, latency_ms, 4, 4000, 0.5, 0.0, 600)


def test_the_budget_is_the_spare_share_shrunk_per_trial() -> None:
    cpu, mem = profiling_budget(MAX, 2, 50.0, 430_000.0, 0.95)
    assert abs(cpu - (50.0 - MAX.total_cpu) * 0.95**2) < 1e-9
    assert abs(mem - (430_000.0 - MAX.total_memory_mb) * 0.95**2) < 1e-6
    assert profiling_budget(MAX, 0, 10.0, 1.0, 0.95) == (0.0, 0.0)  # a production job over the share leaves none


def test_candidates_are_large_enough_and_not_known_to_fail_or_already_profiled() -> None:
    small = MAX.with_(parallelism=4)
    obs = pd.DataFrame([
        {**small.to_dict(), "input_rate": 10000.0, "latency_ms": 900.0},  # fell behind below the chunk
        {**MAX.with_(parallelism=20).to_dict(), "input_rate": 45000.0, "latency_ms": 100.0},  # in the chunk
    ])  # fmt: skip
    good = profiling_candidates(SPACE, _state(100.0), obs, 35000.0, 250.0, 10000.0, None)
    assert small not in good and MAX.with_(parallelism=20) not in good
    assert all(c.total_cpu >= 0.25 * MAX.total_cpu for c in good) and len(good) > 0
    # A production job over its latency target only accepts suggestions of 0.75 x its size or more.
    bad = profiling_candidates(SPACE, _state(900.0), None, 35000.0, 250.0, 10000.0, None)
    assert bad and all(c.total_cpu >= 0.75 * MAX.total_cpu for c in bad)
    assert len(bad) < len(profiling_candidates(SPACE, _state(100.0), None, 35000.0, 250.0, 10000.0, None))
