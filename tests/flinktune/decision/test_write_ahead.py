"""Write-ahead decision rows: old stores gain the columns, and the guard counts unconfirmed attempts."""

from __future__ import annotations

import sqlite3

from flinktune.config_space import Configuration, default_space
from flinktune.decision import Action, Decision, JobState
from flinktune.decision.guard import SafetyGuard
from flinktune.decision.stages import DecisionRecord, RealizeResult
from flinktune.decision.store import SqliteStateStore

A, B = Configuration(12, 1, 1.0, 2048, 10), Configuration(16, 1, 1.0, 2048, 10)


def _state(config, ts):
    return JobState("j", ts, config, True, 1000.0, 1000.0, 0.0, 0.0, 100.0, 2.0, 2048.0, 0.5, 0.0, 600)


def test_a_store_written_before_the_status_column_is_migrated(tmp_path):
    db = tmp_path / "old.db"
    store = SqliteStateStore(db)
    store.record_decision(
        DecisionRecord(
            "j", 0.0, _state(A, 0.0), Decision(Action.RECONFIGURE, "more", "p", target=B), RealizeResult(True, "in-place")
        )
    )
    with sqlite3.connect(db) as con:  # back to the old schema: no status, no error
        con.execute("ALTER TABLE decisions DROP COLUMN error")
        con.execute("ALTER TABLE decisions DROP COLUMN status")
    row = SqliteStateStore(db).decisions("j").iloc[-1]
    assert row["status"] == "applied" and row["error"] is None


def test_an_intended_or_failed_change_starts_the_stabilization_window(tmp_path):
    store = SqliteStateStore(tmp_path / "s.db")
    for status in ("intended", "failed"):
        store.record_decision(
            DecisionRecord(
                "j", 1000.0, _state(A, 1000.0), Decision(Action.RECONFIGURE, "more", "p", target=B), None, status=status
            )
        )
        guard = SafetyGuard(default_space(), 250.0).restore(store.decisions("j"))
        out = guard.review(Decision(Action.RECONFIGURE, "again", "p", target=B), _state(A, 1100.0), 1100.0)
        assert out.action is Action.KEEP and out.reason.startswith("stabilizing"), (status, out.reason)


def test_a_failed_profiling_run_leaves_its_row_before_the_error_goes_on():
    import pytest

    from flinktune.backends import Backend
    from flinktune.clock import ManualClock
    from flinktune.decision.loop import LoopSettings, build_decision_loop
    from flinktune.decision.store import MemoryStateStore
    from flinktune.decision.testing import FrameMetricsSource, RecordingRealizer, raw_samples

    class Profile:
        name = "p"

        def decide(self, state, context):
            return Decision(Action.PROFILE, "learn the shape", self.name, profile_configs=(B,))

    class Broken:
        def profile(self, configs, rate, now):
            raise RuntimeError("profiling cluster gone")

    store = MemoryStateStore()
    backend = Backend("test", FrameMetricsSource(raw_samples("j", 0, 1200, rate=20000, p95=120)), RecordingRealizer(A),
                      ManualClock(600), profiler=Broken())  # fmt: skip
    loop = build_decision_loop(backend, LoopSettings("j", 250.0), policy=Profile(), space=default_space(), store=store)
    with pytest.raises(RuntimeError, match="profiling cluster gone"):
        loop.step()
    row = store.decisions("j").iloc[-1]
    assert row["action"] == "profile" and row["status"] == "failed" and "profiling cluster gone" in row["error"]
