"""Contracts every implementation of a decision stage must keep, shared by their tests.

Use :func:`check_realizer` from each Realizer's own tests (the twin, Kubernetes against its fake API
server, local Flink on a real cluster, the testing one) and :func:`check_state_store` for each
StateStore. They check behaviour through the stage interface only, so a new implementation is
held to the same rules by calling them.
"""

from __future__ import annotations

import math

from flinktune.config_space import Configuration
from flinktune.decision import Action, Decision, JobState
from flinktune.decision.reconfig import ReconfigMode, same_shape
from flinktune.decision.stages import DecisionOutcome, DecisionRecord, RealizeResult

__all__ = ["check_realizer", "check_state_store"]


def _result_ok(res: RealizeResult) -> None:
    assert isinstance(res, RealizeResult) and isinstance(res.mode, ReconfigMode), res
    assert math.isfinite(res.downtime_s) and res.downtime_s >= 0, res


def check_realizer(
    realizer, job: str, in_place: Configuration, redeploy: Configuration, *, in_place_supported: bool = True
) -> None:
    """``realizer`` runs ``job``; ``in_place`` differs from what runs in parallelism only, ``redeploy`` in its shape.

    A no-op when nothing changes; a change is reported changed, in one ReconfigMode, in place exactly
    when the shape is the same (and the cluster supports it), and ``current`` shows it afterwards.
    """
    start = realizer.current(job)
    assert isinstance(start, Configuration)
    assert same_shape(start, in_place) and in_place != start and not same_shape(start, redeploy), "bad contract inputs"
    res = realizer.apply(job, start)
    _result_ok(res)
    assert not res.changed and res.mode is ReconfigMode.NOOP and res.downtime_s == 0, res
    res = realizer.apply(job, in_place)
    _result_ok(res)
    assert res.changed and res.mode is (ReconfigMode.IN_PLACE if in_place_supported else ReconfigMode.REDEPLOY), res
    assert realizer.current(job) == in_place
    res = realizer.apply(job, redeploy)
    _result_ok(res)
    assert res.changed and res.mode is ReconfigMode.REDEPLOY, res
    assert realizer.current(job) == redeploy


def _state(config: Configuration, ts: float, restarts: int = 0) -> JobState:
    return JobState("c", ts, config, True, 1000.0, 1000.0, 0.0, 0.0, 100.0, 2.0, 2048.0, 0.5, 0.0, 600, restarts=restarts)


def check_state_store(store) -> None:
    """Decisions come back oldest first with their outcome; policy memory is per (job, policy) and the newest wins."""
    a = Configuration(12, 1, 1.0, 2048, 10)
    b = a.with_(parallelism=16)
    assert store.decisions("c").empty and store.policy_memory("c", "p") is None
    i1 = store.record_decision(DecisionRecord("c", 100.0, _state(a, 100.0), Decision(Action.RECONFIGURE, "more", "p", target=b), RealizeResult(True, ReconfigMode.IN_PLACE, 3.0)), memory=("p", {"n": 1, "xs": [0.5, 2]}))  # fmt: skip
    i2 = store.record_decision(
        DecisionRecord("c", 400.0, _state(b, 400.0, restarts=1), Decision.keep("p", "fine"), None, dry_run=True)
    )
    store.record_decision(
        DecisionRecord("other", 50.0, _state(a, 50.0), Decision.keep("p", "fine"), None), memory=("p", {"n": 9})
    )
    assert i2 != i1
    rows = store.decisions("c")
    assert list(rows["ts"]) == [100.0, 400.0] and list(rows["action"]) == ["reconfigure", "keep"]
    assert list(rows["changed"]) == [1, 0] and next(iter(rows["mode"])) == "in-place" and list(rows["dry_run"]) == [0, 1]
    assert list(store.decisions("c", limit=1)["ts"]) == [400.0]
    assert store.policy_memory("c", "p") == {"n": 1, "xs": [0.5, 2]}  # a decision without memory keeps the last one
    store.record_decision(DecisionRecord("c", 700.0, _state(b, 700.0), Decision.keep("p", "fine"), None), memory=("p", {"n": 2}))
    assert store.policy_memory("c", "p") == {"n": 2} and store.policy_memory("other", "p") == {"n": 9}
    assert store.policy_memory("c", "q") is None
    try:
        store.record_decision(
            DecisionRecord("c", 800.0, _state(b, 800.0), Decision.keep("p", "fine"), None), memory=("p", {"bad": float("nan")})
        )
    except ValueError as exc:
        assert "policy 'p'" in str(exc) and "not plain JSON" in str(exc)
    else:
        raise AssertionError("a memory that is not plain JSON must be refused")
    assert list(store.decisions("c")["ts"]) == [100.0, 400.0, 700.0], "nothing half-written"
    # Write-ahead: a change stored as intended before the apply, then settled with its outcome and error.
    i3 = store.record_decision(
        DecisionRecord("c", 900.0, _state(b, 900.0), Decision(Action.RECONFIGURE, "less", "p", target=a), None, status="intended")
    )
    assert store.decisions("c", limit=1)["status"].iloc[-1] == "intended"
    rolled_back = DecisionOutcome(RealizeResult(False, ReconfigMode.ROLLED_BACK, 9.0), "rolled-back", "not stable")
    store.update_decision(i3, rolled_back, memory=("p", {"n": 3}))
    last = store.decisions("c", limit=1).iloc[-1]
    assert (last["status"], last["error"], int(last["changed"]), last["mode"]) == ("rolled-back", "not stable", 0, "rolled-back")
    assert store.policy_memory("c", "p") == {"n": 3}
    assert list(store.decisions("c")["status"])[:2] == ["applied", "recorded"]  # statuses default from the outcome
    # Modes: a job never switched has no record (the caller's default is advice); each switch names who and when.
    assert store.job_mode("c") is None
    store.set_mode("c", "act", by="alice", at=1000.0)
    assert store.job_mode("c") == {"job": "c", "mode": "act", "set_by": "alice", "set_at": 1000.0}
    store.set_mode("c", "advise", by="bob", at=2000.0)
    assert store.job_mode("c") == {"job": "c", "mode": "advise", "set_by": "bob", "set_at": 2000.0}
    assert store.job_mode("other") is None
    for bad, by in (("apply", "carol"), ("act", " ")):
        try:
            store.set_mode("c", bad, by=by)
        except ValueError as exc:
            assert "job 'c'" in str(exc)
        else:
            raise AssertionError(f"mode {bad!r} by {by!r} must be refused")
    assert store.job_mode("c")["set_by"] == "bob"
