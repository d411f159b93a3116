"""The spread of the busy time the operator reads: fitted on decisions, and applied by the policy."""

from __future__ import annotations

import numpy as np
import pytest

from flinktune.calibration.busy import OperatorDecision, calibrate_busy_noise, predicted_parallelism, twin_busy
from flinktune.config_space import default_space
from flinktune.decision import Action, JobState, VertexMetrics
from flinktune.decision.stages import PolicyContext
from flinktune.policies.autoscaler import AutoscalerPolicy
from flinktune.twin import ClusterProfile

SPACE = default_space()
MAX = SPACE.maximum
PROFILE = ClusterProfile.default("ysb")
POLICY = AutoscalerPolicy.published("demeter-1.6", SPACE)
CTX = PolicyContext(latency_target_ms=1000.0, recovery_limit_s=180.0)
GRID = np.array([0.0, 0.1, 0.2, 0.3, 0.4, 0.6])


def _noisy(factor: float, sigma: float, n: int = 80, seed: int = 1) -> list[OperatorDecision]:
    """Decisions of the 1.6 operator reading the twin's busy time x ``factor`` x exp(sigma z)."""
    rng = np.random.default_rng(seed)
    out = []
    while len(out) < n:
        p0 = int(rng.integers(4, 25))
        rate = float(rng.uniform(10000.0, 90000.0))
        d = OperatorDecision(p0, p0, rate, 0.0, 0.0)
        busy = factor * twin_busy(PROFILE, MAX, p0, rate) * float(np.exp(sigma * rng.standard_normal()))
        p1 = predicted_parallelism(POLICY, d, busy, MAX.parallelism)
        if p1 != p0:
            out.append(OperatorDecision(p0, p1, rate, 0.0, 0.0))
    return out


def test_no_noise_is_found_in_noiseless_decisions_and_some_in_noisy_ones():
    clean = calibrate_busy_noise(PROFILE, MAX, POLICY, _noisy(0.7, 0.0), 0.7, grid=GRID, draws=50)
    noisy = calibrate_busy_noise(PROFILE, MAX, POLICY, _noisy(0.7, 0.4), 0.7, grid=GRID, draws=50)
    assert clean.busy_time_noise == 0.0
    assert noisy.busy_time_noise is not None and 0.2 <= noisy.busy_time_noise <= 0.6, noisy.note
    assert "upper bound" in noisy.note


def test_too_few_decisions_or_bad_arguments():
    few = calibrate_busy_noise(PROFILE, MAX, POLICY, _noisy(0.7, 0.2, n=3), 0.7, grid=GRID, draws=10)
    assert few.busy_time_noise is None and "not calibrated" in few.note
    with pytest.raises(ValueError, match="sigma"):
        calibrate_busy_noise(PROFILE, MAX, POLICY, [], 0.7, grid=np.array([-0.1]))
    with pytest.raises(ValueError, match="busy_time_scale"):
        calibrate_busy_noise(PROFILE, MAX, POLICY, [], 0.0)
    with pytest.raises(ValueError, match="busy_time_noise"):
        AutoscalerPolicy(SPACE, busy_time_noise=-1.0)


def _state(ts: float, p: int, tpr: float) -> JobState:
    rate = 40000.0
    v = (VertexMetrics("source", p, rate, rate, rate / tpr, 0.0, tpr),)
    return JobState(
        "j", ts, MAX.with_(parallelism=p), True, rate, rate, 0.0, 0.0, 300.0, 8.0, 8000.0, rate / tpr, 0.0, 60, vertices=v
    )


def _first_decision(pol: AutoscalerPolicy, tpr: float) -> tuple[Action, int]:
    for t in range(0, 600, 60):
        d = pol.decide(_state(float(t), 16, tpr), CTX)
        if not d.reason.startswith(("stabilizing", "collecting")):
            return d.action, (d.target.parallelism if d.target is not None else 16)
    raise AssertionError("no decision")


def test_the_policy_reads_a_seeded_noisy_busy_time():
    # At p16, 40k at 30 % busy (true rate 133k): within the bounds [0.5, 0.2] -> keep without noise.
    assert _first_decision(AutoscalerPolicy.published("demeter-1.6", SPACE), 133000.0)[0] is Action.KEEP
    outcomes = [
        _first_decision(AutoscalerPolicy.published("demeter-1.6", SPACE, busy_time_noise=0.5, noise_seed=s), 133000.0)
        for s in range(12)
    ]
    assert len(set(outcomes)) > 1  # the noisy reading changes some decisions
    again = [
        _first_decision(AutoscalerPolicy.published("demeter-1.6", SPACE, busy_time_noise=0.5, noise_seed=s), 133000.0)
        for s in range(12)
    ]
    assert outcomes == again  # a draw depends only on the seed and the time
