"""The operator autoscaler's published versions: 1.6 as Demeter's evaluation ran it, and the newest."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from flinktune.config_space import default_space
from flinktune.decision import Action, JobState, VertexMetrics
from flinktune.decision.stages import PolicyContext
from flinktune.policies import make_policy
from flinktune.policies.autoscaler import VERSIONS, AutoscalerPolicy
from flinktune.replay.harness import ReplaySettings, prepare_replay
from flinktune.twin import ClusterProfile

SPACE = default_space()  # parallelism 8-24 in steps of 4
MAX = SPACE.maximum
CTX = PolicyContext(latency_target_ms=1000.0, recovery_limit_s=180.0)


def _state(ts: float, tpr: float, *, p: int = 24, rate: float = 40000.0, restarts: int = 0) -> JobState:
    v = (VertexMetrics("source", p, rate, rate, rate / tpr, 0.0, tpr),)
    cfg = MAX.with_(parallelism=p)
    return JobState(
        "j", ts, cfg, True, rate, rate, 0.0, 0.0, 300.0, 8.0, 8000.0, rate / tpr, 0.0, 60, vertices=v, restarts=restarts
    )


def _run(pol: AutoscalerPolicy, times, tpr: float, p: int = 24):
    return [(t, pol.decide(_state(float(t), tpr, p=p), CTX)) for t in times]


def test_demeter_1_6_scales_down_after_stabilization_and_one_window_without_the_hour():
    # 40k at 10 % busy (true rate 400k): capacity 40k x (60/300 + 1/0.35) = 122k, factor 0.31 -> clamped 0.4
    # -> ceil(9.6) = 10 -> key groups 24: 12. Stabilization 2 min + 1 min window (from the first
    # observation at 120 s), no 1 h delay.
    pol = AutoscalerPolicy.published("demeter-1.6", SPACE)
    out = _run(pol, range(0, 600, 60), 400000.0)
    first = next(t for t, d in out if d.action is Action.RECONFIGURE)
    assert first == 180 and out[0][1].reason.startswith("stabilizing")
    assert dict(out)[first].target.parallelism == 12
    # The newest version waits its 15 min window and the 1 h scale-down interval on the same input.
    newest = [d for _, d in _run(AutoscalerPolicy.published("newest", SPACE), range(0, 3000, 60), 400000.0)]
    assert all(d.action is Action.KEEP for d in newest) and "delayed" in newest[-1].reason


def test_demeter_1_6_blocks_a_scale_down_within_the_grace_period_after_a_scale_up():
    pol = AutoscalerPolicy.published("demeter-1.6", SPACE)
    # At p12, 40k at 95 % busy: outside the 0.5 upper bound -> scale up at once.
    up = [d for _, d in _run(pol, range(0, 240, 60), 42000.0, p=12)]
    change = next(d for d in up if d.action is Action.RECONFIGURE)
    assert change.target.parallelism > 12
    p_new = change.target.parallelism
    # Now nearly idle at the new parallelism: the scale-down waits out the 1 h grace period.
    after = _run(pol, range(300, 300 + 3900, 60), 400000.0, p=p_new)
    held = [t for t, d in after if "grace period" in d.reason]
    down = [t for t, d in after if d.action is Action.RECONFIGURE]
    assert held and all(d.action is Action.KEEP for t, d in after if t in held)
    assert down and down[0] - 180 >= 3600  # the scale-up happened at t=180
    assert dict(after)[down[0]].target.parallelism < p_new


def test_a_failure_restart_starts_a_new_stabilization_in_1_6_only():
    for version, resets in (("demeter-1.6", True), ("newest", False)):
        pol = AutoscalerPolicy.published(version, SPACE, stabilization_s=120.0, metrics_window_s=60.0)
        pol.decide(_state(0.0, 60000.0), CTX)
        d = pol.decide(_state(300.0, 60000.0, restarts=1), CTX)
        assert d.reason.startswith("stabilizing") is resets, (version, d.reason)


def test_busy_time_scale_divides_the_true_rate_the_operator_reads():
    # 40k at 47 % busy on p24 (true rate 85k): within the bounds [80k at 0.5, 208k at 0.2 with restart]
    # -> keep; read at a quarter of that busy time (true rate 340k) it is under-used and scales down.
    calm = [d for _, d in _run(AutoscalerPolicy.published("demeter-1.6", SPACE), range(0, 300, 60), 85000.0)]
    assert all(d.action is Action.KEEP for d in calm)
    scaled = AutoscalerPolicy.published("demeter-1.6", SPACE, busy_time_scale=0.25)
    assert any(d.action is Action.RECONFIGURE for _, d in _run(scaled, range(0, 300, 60), 85000.0))


def test_key_group_alignment_follows_1_6():
    pol = AutoscalerPolicy.published("demeter-1.6", SPACE)
    assert pol.key_groups == 24
    assert [pol.align(p) for p in (1, 5, 7, 10, 12, 13, 19, 30)] == [1, 6, 8, 12, 12, 13, 19, 24]
    assert AutoscalerPolicy(SPACE).align(10) == 10  # newest: no alignment modelled


def test_versions_and_bad_options_are_checked():
    assert AutoscalerPolicy.published_options("newest") == {} and make_policy("autoscaler", SPACE) == AutoscalerPolicy(SPACE)
    assert VERSIONS["demeter-1.6"]["rescales_in_place"] is False and VERSIONS["1.6"]["utilization_boundary"] == 0.4
    with pytest.raises(ValueError, match="unknown operator version"):
        AutoscalerPolicy.published_options("1.99", SPACE)
    with pytest.raises(ValueError, match="configuration space"):
        AutoscalerPolicy.published_options("demeter-1.6")
    with pytest.raises(ValueError, match="scale_down_mode"):
        AutoscalerPolicy(SPACE, scale_down_mode="lazy")
    with pytest.raises(ValueError, match="busy_time_scale"):
        AutoscalerPolicy(SPACE, busy_time_scale=0.0)
    with pytest.raises(ValueError, match="key_groups"):
        AutoscalerPolicy(SPACE, key_groups=0)


def test_the_replay_runs_savepoint_upgrades_for_a_version_without_in_place_rescaling():
    idx = pd.date_range("2024-01-01", periods=120, freq="1s", tz="UTC")
    trace = pd.Series(np.full(120, 30000.0), index=idx)
    prof = ClusterProfile.default("ysb")
    assert prof.adaptive_scheduler
    opts = AutoscalerPolicy.published_options("demeter-1.6", SPACE)
    rig = prepare_replay("autoscaler", trace, prof, SPACE, ReplaySettings(failures="none"), policy_options=opts)
    assert rig.twin.profile.adaptive_scheduler is False and rig.policy.rescales_in_place is False
    plain = prepare_replay("autoscaler", trace, prof, SPACE, ReplaySettings(failures="none"))
    assert plain.twin.profile.adaptive_scheduler is True
