"""Trigger safety: unknown conf keys, dry_run per run type, the job an asset-triggered run acts on."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from flinktune.orchestration.dag_tasks.triggers import TriggerError, asset_extra, check_conf, resolve_dry_run, run_params

DECIDE = ["job", "policy", "dry_run", "ticks"]
DEFAULTS = {"job": "demo", "policy": "flinktune", "dry_run": None, "ticks": 1}


def _run(run_type: str, conf: dict | None = None, events: list | None = None) -> SimpleNamespace:
    return SimpleNamespace(run_type=run_type, conf=conf or {}, consumed_asset_events=events or [])


def _event(extra: dict) -> SimpleNamespace:
    return SimpleNamespace(extra=extra)


def test_unknown_conf_key_is_refused_naming_the_closest_valid_one() -> None:
    with pytest.raises(TriggerError, match=r"DAG 'flinktune_decide': unknown conf key 'tick' \(did you mean 'ticks'\?\)"):
        check_conf("flinktune_decide", {"tick": 3}, DECIDE)
    with pytest.raises(TriggerError, match=r"unknown conf key 'zzz'; it takes: dry_run, job, policy, ticks"):
        run_params({**DEFAULTS, "zzz": 1}, dag_id="flinktune_decide", known=DECIDE, dag_run=_run("manual", {"zzz": 1}))
    check_conf("flinktune_decide", {"ticks": 3, "job": "a"}, DECIDE)  # known keys pass


@pytest.mark.parametrize(
    ("run_type", "expected"),
    [("manual", True), ("operator_triggered", True), ("backfill", True), ("scheduled", False), ("asset_triggered", False)],
)
def test_empty_dry_run_is_dry_for_runs_started_by_hand_and_acts_on_the_schedule(run_type: str, expected: bool) -> None:
    events = [_event(asset_extra("wordcount"))] if run_type == "asset_triggered" else None
    params = run_params(DEFAULTS, dag_id="flinktune_decide", known=DECIDE, dag_run=_run(run_type, events=events))
    assert params["dry_run"] is expected and run_type in params["dry_run_reason"]


def test_an_explicit_dry_run_wins_over_the_run_type() -> None:
    assert resolve_dry_run(False, "manual")[0] is False
    assert resolve_dry_run(True, "scheduled")[0] is True


def test_an_asset_triggered_run_acts_on_the_job_its_events_name_never_the_default() -> None:
    run = _run("asset_triggered", events=[_event(asset_extra("wordcount")), _event({"job": "wordcount"})])
    assert run_params(DEFAULTS, dag_id="flinktune_decide", known=DECIDE, dag_run=run)["job"] == "wordcount"
    with pytest.raises(TriggerError, match="name no job"):
        run_params(DEFAULTS, dag_id="flinktune_decide", known=DECIDE, dag_run=_run("asset_triggered", events=[_event({})]))
    with pytest.raises(TriggerError, match=r"several jobs \(a, b\)"):
        run_params(
            DEFAULTS,
            dag_id="flinktune_decide",
            known=DECIDE,
            dag_run=_run("asset_triggered", events=[_event({"job": "a"}), _event({"job": "b"})]),
        )
    # A scheduled run keeps the params' job.
    assert run_params(DEFAULTS, dag_id="flinktune_decide", known=DECIDE, dag_run=_run("scheduled"))["job"] == "demo"
