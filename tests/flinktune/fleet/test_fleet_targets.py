"""run_targets: a DAG run acts on the whole fleet, or on the one job its trigger names."""

from pathlib import Path

import pytest

from flinktune.fleet import load_fleet_file
from flinktune.fleet.targets import FleetTargetError, run_targets

PARAMS = {"job": "demo", "policy": "flinktune", "dry_run": False}


@pytest.fixture
def fleet(tmp_path: Path):
    path = tmp_path / "fleet.yaml"
    path.write_text(
        "jobs:\n  - name: ads\n    policy: reactive\n    latency_target_ms: 800\n  - name: clicks\n    mode: act\n"
        "  - name: bad\n    latency_target_ms: 0\n"
    )
    return load_fleet_file(path)


def test_the_schedule_acts_on_every_managed_job_with_its_own_settings(fleet) -> None:
    targets = run_targets(PARAMS, conf={}, run_type="scheduled", fleet=fleet)
    goals = {"latency_target_ms": 1000.0, "recovery_limit_s": 180.0}
    assert targets == [
        {"job": "ads", "policy": "reactive", "dry_run": False, "mode": None, "mode_source": "fleet.yaml: jobs[0]",
         "goals": {**goals, "latency_target_ms": 800.0}},  # no mode set: it advises unless switched in the store
        {"job": "clicks", "policy": "flinktune", "dry_run": False, "mode": "act", "mode_source": "fleet.yaml: jobs[1]",
         "goals": goals},  # its own mode setting
    ], "the held job 'bad' is left out"  # fmt: skip


def test_a_manual_trigger_stays_dry_even_for_a_job_in_act_mode(fleet) -> None:
    from flinktune.orchestration.dag_tasks.triggers import run_params

    class Run:
        run_type, conf, consumed_asset_events = "manual", {"job": "clicks"}, []

    params = run_params({**PARAMS, "job": "clicks", "dry_run": None}, dag_id="flinktune_decide", known=PARAMS, dag_run=Run())
    [target] = run_targets(params, conf=Run.conf, run_type="manual", fleet=fleet)
    assert (target["job"], target["mode"], target["dry_run"]) == ("clicks", "act", True)


def test_a_trigger_naming_a_job_acts_on_it_alone_and_its_conf_policy_wins(fleet) -> None:
    one = run_targets({**PARAMS, "job": "ads"}, conf={"job": "ads"}, run_type="manual", fleet=fleet)
    assert [(t["job"], t["policy"], t["dry_run"]) for t in one] == [("ads", "reactive", False)]
    forced = run_targets({**PARAMS, "job": "ads", "policy": "ds2"}, conf={"job": "ads", "policy": "ds2"},
                         run_type="manual", fleet=fleet)  # fmt: skip
    assert forced[0]["policy"] == "ds2"
    asset = run_targets({**PARAMS, "job": "clicks"}, conf={}, run_type="asset_triggered", fleet=fleet)
    assert [t["job"] for t in asset] == ["clicks"]


def test_a_held_job_named_by_a_trigger_is_refused_with_its_reason(fleet) -> None:
    with pytest.raises(FleetTargetError, match=r"job 'bad' is held in the fleet: .*latency_target_ms"):
        run_targets({**PARAMS, "job": "bad"}, conf={"job": "bad"}, run_type="manual", fleet=fleet)


def test_no_fleet_is_the_one_job_of_the_params_and_an_empty_fleet_is_refused(tmp_path: Path) -> None:
    assert run_targets(PARAMS, conf={}, run_type="scheduled", fleet=None) == [
        {"job": "demo", "policy": "flinktune", "dry_run": False, "mode": None, "mode_source": "no fleet entry", "goals": {}}
    ]
    path = tmp_path / "held.yaml"
    path.write_text("jobs:\n  - name: only\n    policy: magic\n")
    with pytest.raises(FleetTargetError, match=r"no managed job to act on .*only: .*unknown policy 'magic'"):
        run_targets(PARAMS, conf={}, run_type="scheduled", fleet=load_fleet_file(path))
