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
        "jobs:\n  - name: ads\n    policy: reactive\n    latency_target_ms: 800\n  - name: clicks\n    dry_run: true\n"
        "  - name: bad\n    latency_target_ms: 0\n"
    )
    return load_fleet_file(path)


def test_the_schedule_acts_on_every_managed_job_with_its_own_settings(fleet) -> None:
    targets = run_targets(PARAMS, conf={}, run_type="scheduled", fleet=fleet)
    goals = {"latency_target_ms": 1000.0, "recovery_limit_s": 180.0}
    assert targets == [
        {"job": "ads", "policy": "reactive", "dry_run": False, "goals": {**goals, "latency_target_ms": 800.0}},
        {"job": "clicks", "policy": "flinktune", "dry_run": True, "goals": goals},  # its own dry_run setting
    ], "the held job 'bad' is left out"


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
        {"job": "demo", "policy": "flinktune", "dry_run": False, "goals": {}}
    ]
    path = tmp_path / "held.yaml"
    path.write_text("jobs:\n  - name: only\n    policy: magic\n")
    with pytest.raises(FleetTargetError, match="no managed job to act on .*only: .*unknown policy 'magic'"):
        run_targets(PARAMS, conf={}, run_type="scheduled", fleet=load_fleet_file(path))
