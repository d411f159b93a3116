"""The twin's decide task saves its state per tick: a kill never duplicates decisions."""

from __future__ import annotations

import pytest

import flinktune.runs.decide as decide_run
from flinktune.decision.store import SqliteStateStore
from jobs import decide, simulate


class Killed(BaseException):
    """The task dying (nothing in the job may catch it)."""


def test_a_kill_between_ticks_neither_loses_nor_duplicates_a_decision(settings, monkeypatch):
    simulate.run(job="demo", hours=0.6, settings=settings)
    monkeypatch.setenv("FLINKTUNE_CLUSTER", "twin")
    decide.run(job="demo", ticks=1, policy="static", settings=settings)
    store = SqliteStateStore(settings.state_db)
    assert len(store.decisions("demo")) == 1
    real_step = decide_run.build_decision_loop

    def killing_loop(*a, **kw):  # the second tick's decision is stored, then the task dies before the twin is saved
        loop = real_step(*a, **kw)
        step = loop.step

        def step_then_die():
            step()
            raise Killed()

        loop.step = step_then_die
        return loop

    monkeypatch.setattr(decide_run, "build_decision_loop", killing_loop)
    with pytest.raises(Killed):
        decide.run(job="demo", ticks=1, policy="static", settings=settings)
    monkeypatch.setattr(decide_run, "build_decision_loop", real_step)
    out = decide.run(job="demo", ticks=2, policy="static", settings=settings)
    rows = store.decisions("demo")
    assert rows["ts"].is_unique, rows[["id", "ts", "action"]].to_string()
    assert out["decisions"][0]["action"] == "skipped" and len(rows) == 3
