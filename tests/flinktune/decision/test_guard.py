from flinktune.config_space import Configuration, default_space
from flinktune.decision import Action, Decision, JobState
from flinktune.decision.guard import GuardRules, SafetyGuard, is_scale_down
from flinktune.decision.stages import DecisionRecord, RealizeResult
from flinktune.decision.store import MemoryStateStore

SPACE = default_space()
MAX = SPACE.maximum
SMALL = Configuration(12, 2, 2.0, 2048, 10)


def state(config=MAX, p95=200.0, lag_growth=0.0, problems=()):
    return JobState("j", 0.0, config, True, 30000, 30000, 0, lag_growth, p95, 4, 4000, 0.5, 0.0, 600, True, tuple(problems))


def reconf(target, reason="cheaper"):
    return Decision(Action.RECONFIGURE, reason, "test", target=target)


def guard(**rules):
    return SafetyGuard(SPACE, latency_target_ms=1000.0, rules=GuardRules(**rules))


def test_hold_on_unfit_data_says_why():
    d = guard().review(reconf(SMALL), state(problems=["stale data: newest sample is 900 s old"]), now=0)
    assert d.action is Action.KEEP and "hold" in d.reason and "900 s old" in d.reason


def test_refuses_targets_outside_space_and_over_quota():
    g = guard(quota_cpu=10)
    d = g.review(reconf(Configuration(10, 1, 1.0, 1024, 10)), state(), now=0)
    assert d.action is Action.KEEP and "outside the configuration space" in d.reason
    d = g.review(reconf(Configuration(24, 2, 1.0, 1024, 10)), state(), now=0)
    assert d.action is Action.KEEP and "quota" in d.reason


def test_stabilization_then_one_scale_down_per_window():
    g = guard(stabilization_s=300, scale_down_window_s=1800)
    st = state()
    assert g.review(reconf(SMALL), st, now=1000).action is Action.RECONFIGURE
    g.record(1000, st, SMALL)
    smaller = Configuration(8, 2, 2.0, 2048, 10)
    d = g.review(reconf(smaller), state(SMALL), now=1100)
    assert d.action is Action.KEEP and "stabilizing" in d.reason
    d = g.review(reconf(smaller), state(SMALL), now=1400)
    assert d.action is Action.KEEP and "scale-down deferred" in d.reason
    # a scale-up is not held by the scale-down window
    assert g.review(reconf(MAX), state(SMALL), now=1400).action is Action.RECONFIGURE
    assert g.review(reconf(smaller), state(SMALL), now=2900).action is Action.RECONFIGURE


def test_a_scale_up_after_a_scale_up_waits_the_shorter_climb_stabilization():
    g = guard(stabilization_s=300, climb_stabilization_s=180)
    p8, p12, p16 = (Configuration(p, 2, 2.0, 4096, 10) for p in (8, 12, 16))
    g.record(1000, state(p8), p12)  # a scale-up
    held = g.review(reconf(p16), state(p12), now=1150)
    assert held.action is Action.KEEP and "wait 30 s more" in held.reason
    assert g.review(reconf(p16), state(p12), now=1200).action is Action.RECONFIGURE  # still climbing: 180 s
    # anything else after a scale-up keeps the full window
    assert g.review(reconf(Configuration(12, 2, 2.0, 4096, 30)), state(p12), now=1200).action is Action.KEEP


def test_rollback_when_goals_missed_after_a_change():
    g = guard(stabilization_s=300, rollback_window_s=900)
    g.record(0, state(MAX, p95=300), SMALL)
    d = g.review(Decision.keep("test", "fine"), state(SMALL, p95=5000), now=400)
    assert d.action is Action.RECONFIGURE and d.target == MAX and d.reason.startswith("rollback")
    # goals met: no rollback
    assert g.review(Decision.keep("test", "fine"), state(SMALL, p95=300), now=400).action is Action.KEEP


def test_restore_from_store_keeps_cooldowns_across_restarts():
    store = MemoryStateStore()
    store.record_decision(DecisionRecord("j", 1000, state(), reconf(SMALL), RealizeResult(True, "redeploy", 40)))
    g = guard(stabilization_s=300).restore(store.decisions("j"))
    d = g.review(reconf(Configuration(8, 2, 2.0, 2048, 10)), state(SMALL), now=1100)
    assert "stabilizing" in d.reason


def test_is_scale_down():
    assert is_scale_down(MAX, SMALL)
    assert not is_scale_down(SMALL, MAX)


def test_no_rollback_for_a_miss_caused_by_a_failure():
    """A failure's catch-up spike (numRestarts rose) is not the change's fault: no rollback."""
    g = guard(stabilization_s=300, rollback_window_s=900, failure_grace_s=600)
    g.record(0, state(MAX, p95=300), SMALL)
    failed = JobState("j", 0.0, SMALL, True, 30000, 30000, 0, 0.0, 5000, 4, 4000, 0.5, 0.0, 600, True, (), (), restarts=1)
    assert g.review(Decision.keep("test", "fine"), failed, now=400).action is Action.KEEP
    # still in the failure's grace period, even when the next window shows no restart
    assert g.review(Decision.keep("test", "fine"), state(SMALL, p95=5000), now=700).action is Action.KEEP
    assert g.after_failure(700) and not g.after_failure(1100)


def test_rollback_still_happens_in_steady_operation_after_the_grace_period():
    g = guard(stabilization_s=300, rollback_window_s=2000, failure_grace_s=600)
    g.record(0, state(MAX, p95=300), SMALL)
    failed = JobState("j", 0.0, SMALL, True, 30000, 30000, 0, 0.0, 5000, 4, 4000, 0.5, 0.0, 600, True, (), (), restarts=1)
    g.review(Decision.keep("test", "fine"), failed, now=400)
    d = g.review(Decision.keep("test", "fine"), state(SMALL, p95=5000), now=1100)
    assert d.action is Action.RECONFIGURE and d.target == MAX and d.reason.startswith("rollback")


def _skewed_state():
    """A real twin window whose bottleneck is a hot key: more parallelism cannot help."""
    import numpy as np

    from flinktune.decision.evaluation import evaluate
    from flinktune.twin import ClusterProfile, TwinJob
    from flinktune.twin.imbalance import Imbalance

    cfg = Configuration(8, 2, 2.0, 4096, 30)
    twin = TwinJob(ClusterProfile.default("tsw"), cfg, job="j", detail="subtask", seed=0,
                   imbalance=Imbalance(hot_vertex="window", hot_key_share=0.4, hot_subtask=2))  # fmt: skip
    state = evaluate("j", twin.run(np.full(120, 40000.0)), cfg, now=twin.now, window_s=120)
    assert state.analysis is not None and state.analysis.prefers_no_change and state.restarts == 0
    return state


def test_skew_rule_holds_a_planned_scale_up_and_says_why():
    st = _skewed_state()
    up = Configuration(16, 2, 2.0, 4096, 30)
    d = guard().review(reconf(up, "latency above target"), st, now=st.ts)
    assert d.action is Action.KEEP and d.reason.startswith("held reconfigure to") and "scaling does not help" in d.reason
    assert d.inputs["held_target"]["parallelism"] == 16 and d.inputs["proposed_reason"] == "latency above target"
    # a scale-down is no bet on parallelism: not held
    assert guard().review(reconf(Configuration(8, 1, 1.0, 4096, 30)), st, now=st.ts).action is Action.RECONFIGURE


def test_a_guard_rollback_is_never_held_by_the_skew_rule():
    """The rollback to a larger configuration that met the goals is a scale-up in a skewed window:
    the guard's last word stands, also after the analysis is quoted (the loop's order)."""
    from dataclasses import replace

    from flinktune.decision.explain import annotate

    st = _skewed_state()
    before = Configuration(16, 2, 2.0, 4096, 30)
    g = SafetyGuard(SPACE, latency_target_ms=st.latency_p95_ms / 2)  # the skewed window misses the goal
    g.record(st.ts - 400, replace(st, config=before, latency_p95_ms=1.0, lag_growth=0.0), st.config)
    for planned in (Decision.keep("test", "fine"), reconf(Configuration(20, 2, 2.0, 4096, 30), "scale up")):
        d = annotate(g.review(planned, st, now=st.ts), st)
        assert d.action is Action.RECONFIGURE and d.target == before and d.reason.startswith("rollback"), d.reason


def test_restore_keeps_the_failure_grace_across_restarts():
    """A failure seen by an earlier run still excuses the catch-up miss in the next run (no rollback)."""
    store = MemoryStateStore()
    store.record_decision(DecisionRecord("j", 0, state(MAX, p95=300), reconf(SMALL), RealizeResult(True, "redeploy", 40)))
    failed = JobState("j", 300.0, SMALL, True, 30000, 30000, 0, 0.0, 5000, 4, 4000, 0.5, 0.0, 600, True, (), (), restarts=1)
    store.record_decision(DecisionRecord("j", 400, failed, Decision.keep("test", "fine"), None))
    g = guard(stabilization_s=300, rollback_window_s=900, failure_grace_s=600).restore(store.decisions("j"))
    assert g.last_failure_ts == 400
    assert g.review(Decision.keep("test", "fine"), state(SMALL, p95=5000), now=700).action is Action.KEEP


def test_every_rule_fires_at_the_default_settings():
    """Each rule with GuardRules() as shipped (quotas are off unless set): times come from the defaults,
    so a default that could never be reached (a window shorter than its threshold) fails here."""
    r = GuardRules()
    fresh = lambda: SafetyGuard(SPACE, latency_target_ms=1000.0)  # noqa: E731  # the defaults, nothing given
    # 1. unfit data
    d = fresh().review(reconf(SMALL), state(problems=["frozen metrics: ..."]), now=0)
    assert d.action is Action.KEEP and "frozen metrics" in d.reason
    # 2. rollback inside the default window, after the default stabilization
    g = fresh()
    g.record(0, state(MAX, p95=300), SMALL)
    d = g.review(Decision.keep("test", "fine"), state(SMALL, p95=5000), now=min(r.rollback_window_s, r.stabilization_s + 1))
    assert d.action is Action.RECONFIGURE and d.reason.startswith("rollback")
    # 3. bounds
    d = fresh().review(reconf(Configuration(10, 1, 1.0, 1024, 10)), state(), now=0)
    assert d.action is Action.KEEP and "outside the configuration space" in d.reason
    # 4. stabilization (and the shorter climb window between two scale-ups)
    g = fresh()
    g.record(1000, state(), SMALL)
    d = g.review(reconf(Configuration(8, 2, 2.0, 2048, 10)), state(SMALL), now=1000 + r.stabilization_s / 2)
    assert d.action is Action.KEEP and "stabilizing" in d.reason
    g = fresh()
    p8, p12, p16 = (Configuration(p, 2, 2.0, 4096, 10) for p in (8, 12, 16))
    g.record(1000, state(p8), p12)
    assert g.review(reconf(p16), state(p12), now=1000 + r.climb_stabilization_s - 1).action is Action.KEEP
    assert g.review(reconf(p16), state(p12), now=1000 + r.climb_stabilization_s).action is Action.RECONFIGURE
    # 5. one scale-down per window: a second one after the stabilization but inside the window
    g = fresh()
    g.record(1000, state(), SMALL)
    d = g.review(reconf(Configuration(8, 2, 2.0, 2048, 10)), state(SMALL), now=1000 + r.stabilization_s + 1)
    assert r.stabilization_s + 1 < r.scale_down_window_s and d.action is Action.KEEP and "scale-down deferred" in d.reason
