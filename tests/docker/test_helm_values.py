"""docker/helm/values.yaml (the official Airflow chart's values) against docker/helm/values.schema.json,
the subset of the chart's schema for the keys we set, with our rules (no helm binary here).

The schema is closed, so a misspelt key fails; credentials go only by Secret reference.
"""

from __future__ import annotations

import copy
import importlib.util
import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

HELM = Path(__file__).resolve().parents[2] / "docker" / "helm"


def _values() -> dict[str, Any]:
    return yaml.safe_load((HELM / "values.yaml").read_text())


def _errors(values: dict[str, Any]) -> list[str]:
    schema = json.loads((HELM / "values.schema.json").read_text())
    jsonschema.Draft7Validator.check_schema(schema)
    return [f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in jsonschema.Draft7Validator(schema).iter_errors(values)]


def test_shipped_values_meet_the_schema() -> None:
    assert _errors(_values()) == []


def _with(change) -> dict[str, Any]:
    values = copy.deepcopy(_values())
    change(values)
    return values


@pytest.mark.parametrize(
    ("what", "change", "where"),
    [
        ("a misspelt key", lambda v: v["workers"].update(replica=3), "workers"),
        ("another executor", lambda v: v.update(executor="LocalExecutor"), "executor"),
        ("the chart's own PostgreSQL", lambda v: v.update(postgresql={"enabled": True}), "postgresql/enabled"),
        ("a database URL as a value", lambda v: v["data"].update(metadataConnection={"pass": "pw"}), "data"),
        ("a fernet key as a value", lambda v: v.update(fernetKey="abc"), ""),
        ("a token as a plain variable", lambda v: v["env"].append({"name": "FLINKTUNE_PROMETHEUS_TOKEN", "value": "t"}), "env/"),
        (
            "the MLflow URI as a plain variable",
            lambda v: v["env"].append({"name": "FLINKTUNE_MLFLOW_TRACKING_URI", "value": "postgresql://u:p@db/mlflow"}),
            "env/",
        ),
        ("the chart's pod-launching Role", lambda v: v.update(allowPodLaunching=True), "allowPodLaunching"),
        (
            "the state store URL as a plain variable",
            lambda v: v["env"].append({"name": "FLINKTUNE_STATE_URL", "value": "postgresql://u:p@db/flinktune"}),
            "env/",
        ),
        ("a password in the auth manager's config", lambda v: v["config"]["core"].update(admin_password="pw"), "config/core"),
        ("a user without a role", lambda v: v["config"]["core"].update(simple_auth_manager_users="admin"), "config/core"),
        (
            "a broker URL in the Celery settings",
            lambda v: v["config"]["celery"].update(extra_celery_config='{"broker_url": "redis://:pw@redis:6379/0"}'),
            "config/celery",
        ),
    ],
)
def test_the_schema_refuses(what: str, change, where: str) -> None:
    errors = _errors(_with(change))
    assert errors and all(e.startswith(where) for e in errors), f"{what}: {errors}"


def test_the_workers_and_the_api_server_mount_the_state_volume_where_flinktune_looks() -> None:
    values = _values()
    var_dir = next(e["value"] for e in values["env"] if e["name"] == "FLINKTUNE_VAR_DIR")
    for component in ("workers", "apiServer"):  # the tasks write it; the plugin's pages read it
        mounts = {m["name"]: m["mountPath"] for m in values[component]["extraVolumeMounts"]}
        claims = {v["name"]: v["persistentVolumeClaim"]["claimName"] for v in values[component]["extraVolumes"]}
        assert {claims[n] for n, path in mounts.items() if path == var_dir} == {"flinktune-var"}, component


def test_every_credential_is_a_secret_reference() -> None:
    values = _values()
    by_reference = {s["envName"] for s in values["secret"]}
    assert {"FLINKTUNE_MLFLOW_TRACKING_URI", "FLINKTUNE_PROMETHEUS_TOKEN"} <= by_reference
    refs = json.loads(next(e["value"] for e in values["env"] if e["name"] == "FLINKTUNE_TRAINER_SECRET_REFS"))
    assert set(refs) == {"FLINKTUNE_MLFLOW_TRACKING_URI"}, "the trainer pod gets the MLflow URI by secretKeyRef"


def test_the_state_store_is_postgresql_by_secret_reference() -> None:
    values = _values()
    state = [s for s in values["secret"] if s["envName"] == "FLINKTUNE_STATE_URL"]
    assert state == [{"envName": "FLINKTUNE_STATE_URL", "secretName": "flinktune-state", "secretKey": "url"}]
    assert "FLINKTUNE_STATE_DB" not in {e["name"] for e in values["env"]}, "no SQLite file shared over a volume"


def test_there_is_a_way_in_an_admin_whose_password_file_every_api_server_replica_shares() -> None:
    values = _values()
    core = values["config"]["core"]
    users = dict(pair.split(":") for pair in core["simple_auth_manager_users"].split(","))
    assert "admin" in users.values()
    mounts = [m["mountPath"] for m in values["apiServer"]["extraVolumeMounts"]]
    assert any(core["simple_auth_manager_passwords_file"].startswith(m.rstrip("/") + "/") for m in mounts)
    assert values["createUserJob"] == {"enabled": False}, "airflow users create is the FAB auth manager's"


def test_every_worker_loads_the_decide_modules_before_it_forks_its_tasks() -> None:
    extra = json.loads(_values()["config"]["celery"]["extra_celery_config"])
    assert extra == {"imports": ["flinktune.orchestration.dag_tasks.worker_preload"]}
    assert importlib.util.find_spec(extra["imports"][0]) is not None, "the module a worker imports at its start"
