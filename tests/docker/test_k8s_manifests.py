"""docker/k8s manifests: valid Kubernetes objects (kubernetes client models), least-privilege RBAC,
and an example FlinkDeployment that matches the operator's CRD and flinktune's configuration space."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes.client import ApiClient

from flinktune.config_space import default_space
from flinktune.kubernetes import CRDValidationError, config_from_object, load_crd_schema, validate_object

K8S = Path(__file__).resolve().parents[2] / "docker" / "k8s"
MODELS = {"ServiceAccount": "V1ServiceAccount", "Role": "V1Role", "RoleBinding": "V1RoleBinding",
          "Deployment": "V1Deployment"}


def _objects(name: str) -> list[dict[str, Any]]:
    return [doc for doc in yaml.safe_load_all((K8S / name).read_text()) if doc]


def _roundtrip(obj: dict[str, Any]) -> dict[str, Any]:
    """Deserialise into the client's model (required fields and types checked) and back: an unknown or
    misspelt field does not survive, so the result differs from the input."""
    client = ApiClient()
    model = client.deserialize(json.dumps(obj), MODELS[obj["kind"]], "application/json")
    return client.sanitize_for_serialization(model)


@pytest.mark.parametrize("name", ["rbac.yaml", "decider.yaml"])
def test_manifests_are_valid_kubernetes_objects_without_unknown_fields(name: str) -> None:
    for obj in _objects(name):
        assert obj["kind"] in MODELS, f"{name}: unexpected kind {obj['kind']}"
        assert _roundtrip(obj) == obj, f"{name}: {obj['kind']} {obj['metadata']['name']} has unknown or mistyped fields"


def test_roundtrip_catches_a_misspelt_field() -> None:
    [deployment] = _objects("decider.yaml")
    deployment["spec"]["template"]["spec"]["serviceAccount_name"] = "oops"
    assert _roundtrip(deployment) != deployment


def test_rbac_allows_only_reading_and_patching_flinkdeployments_in_named_namespaces() -> None:
    objects = _objects("rbac.yaml")
    kinds = [o["kind"] for o in objects]
    assert "ClusterRole" not in kinds and "ClusterRoleBinding" not in kinds
    [account] = [o for o in objects if o["kind"] == "ServiceAccount"]
    roles = [o for o in objects if o["kind"] == "Role"]
    bindings = [o for o in objects if o["kind"] == "RoleBinding"]
    assert roles and len(bindings) == len(roles)
    for role in roles:
        assert role["metadata"]["namespace"], "a Role lives in a named namespace"
        assert role["rules"] == [{"apiGroups": ["flink.apache.org"], "resources": ["flinkdeployments"],
                                  "verbs": ["get", "list", "watch", "patch"]}]
        [binding] = [b for b in bindings if b["metadata"]["namespace"] == role["metadata"]["namespace"]]
        assert binding["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": role["metadata"]["name"]}
        assert binding["subjects"] == [{"kind": "ServiceAccount", "name": account["metadata"]["name"],
                                        "namespace": account["metadata"]["namespace"]}]

    [deployment] = _objects("decider.yaml")
    pod = deployment["spec"]["template"]["spec"]
    assert pod["serviceAccountName"] == account["metadata"]["name"]
    assert deployment["metadata"]["namespace"] == account["metadata"]["namespace"]
    env = {e["name"]: e.get("value") for e in pod["containers"][0]["env"]}
    assert env["FLINKTUNE_CLUSTER"] == "kubernetes"
    assert env["FLINKTUNE_K8S_NAMESPACE"] in {r["metadata"]["namespace"] for r in roles}, "the Role must cover it"
    assert env["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"] is None, "database URLs come from a Secret"


def test_example_flinkdeployment_matches_the_crd_and_the_configuration_space() -> None:
    [ysb] = _objects("flinkdeployment-ysb.yaml")
    schema = load_crd_schema()
    validate_object(ysb, schema, what="docker/k8s/flinkdeployment-ysb.yaml")
    config = config_from_object(ysb)
    assert default_space().contains(config), config
    broken = json.loads(json.dumps(ysb))
    broken["spec"]["job"]["upgradeMode"] = "sometimes"
    with pytest.raises(CRDValidationError, match=r"\$\.spec\.job\.upgradeMode"):
        validate_object(broken, schema)
