"""The watch task: which fleet jobs it asks a decision for, and what it passes on."""

from __future__ import annotations

import pytest

from flinktune.orchestration.dag_tasks import tasks
from jobs import watch


def test_on_the_twin_the_watch_leaves_it_to_the_decide_run_and_says_so(settings, monkeypatch):
    monkeypatch.setenv("FLINKTUNE_CLUSTER", "twin")
    out = watch.run(job="demo", settings=settings)
    assert out["alarm"] is None and "between its own ticks" in out["note"]


def test_the_fleet_watch_triggers_watched_jobs_whose_alarm_fired_and_isolates_failures(settings, monkeypatch):
    seen: list[str] = []

    def fake_run(*, job, settings):  # the watch job is another stage: what the task does with its answers is tested
        seen.append(job)
        if job == "broken":
            raise ConnectionError("lake unreadable")
        return {"job": job, "ts": 1.0, "alarm": "backlog grew" if job == "late" else None}

    monkeypatch.setattr(watch, "run", fake_run)
    monkeypatch.setattr(tasks, "_settings", lambda: settings)
    targets = [
        {"job": "late", "policy": "flinktune", "dry_run": False, "goals": {"latency_target_ms": 500.0}},
        {"job": "calm", "policy": "flinktune", "dry_run": False, "goals": {}},
        {"job": "broken", "policy": "flinktune", "dry_run": False, "goals": {}},
        {"job": "baseline", "policy": "autoscaler", "dry_run": False, "goals": {}},
    ]
    confs = tasks.watch_fleet(targets)
    assert confs == [{"job": "late", "policy": "flinktune", "dry_run": False, "trigger": "backlog grew"}]
    assert seen == ["late", "calm", "broken"], "a baseline keeps its own cadence: not watched"


def test_a_trigger_on_the_twin_is_refused(settings, monkeypatch):
    from jobs import decide, simulate

    simulate.run(job="demo", hours=0.3, settings=settings)
    monkeypatch.setenv("FLINKTUNE_CLUSTER", "twin")
    with pytest.raises(ValueError, match="watch trigger is for a real cluster"):
        decide.run(job="demo", policy="static", settings=settings, trigger="backlog grew")
