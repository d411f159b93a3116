"""Every manifest under docker/ against its schema, offline (a kubeconform-style check), and Pod
Security "restricted" on every pod flinktune ships or creates.

Core objects are validated strictly (unknown fields fail) against the Kubernetes JSON schemas that
the ``kubernetes-validate`` package ships; FlinkDeployments against the operator's CRD shipped in
``flinktune/resources/crds/``. Pod Security: the Airflow pods (docker/helm/values.yaml's security
contexts) and the trainer pod the code builds meet the "restricted" profile's fields.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml
from kubernetes.client import ApiClient

from flinktune.config_space import default_space
from flinktune.kubernetes import CRDValidationError, config_from_object, load_crd_schema, validate_object
from flinktune.orchestration.dag_tasks.trainer_pod import TrainerPodConfig, trainer_pod

DOCKER = Path(__file__).resolve().parents[2] / "docker"
MANIFESTS = sorted((DOCKER / "k8s").glob("*.yaml"))
#: The oldest Kubernetes minor the manifests must be valid for (the Flink operator 1.15's floor is lower).
KUBERNETES_VERSION = "1.30.0"
#: Volume types the restricted profile allows.
RESTRICTED_VOLUMES = {"configMap", "csi", "downwardAPI", "emptyDir", "ephemeral", "persistentVolumeClaim", "projected", "secret"}


def _objects(path: Path) -> list[dict[str, Any]]:
    return [doc for doc in yaml.safe_load_all(path.read_text()) if doc]


def validate_manifest(obj: dict[str, Any], where: str) -> None:
    """Strict schema validation of one object; raises with the object and the failing path."""
    if obj.get("apiVersion", "").startswith("flink.apache.org/"):
        validate_object(obj, load_crd_schema(), what=where)
        return
    try:
        kubernetes_validate.validate(obj, KUBERNETES_VERSION, strict=True)
    except kubernetes_validate.ValidationError as exc:
        path = "/".join(str(p) for p in exc.path)
        raise AssertionError(f"{where}: {obj['kind']} {obj['metadata'].get('name')}: {path}: {exc.message}") from None


def restricted_violations(pod: dict[str, Any], pod_defaults: dict[str, Any] | None = None) -> list[str]:
    """The Pod Security "restricted" fields ``pod`` (a PodSpec as JSON) misses, one line each."""
    found = []
    pod_sc = {**(pod_defaults or {}), **(pod.get("securityContext") or {})}
    for key in ("hostNetwork", "hostPID", "hostIPC"):
        if pod.get(key):
            found.append(f"{key} is set")
    for volume in pod.get("volumes") or []:
        kinds = set(volume) - {"name"}
        if not kinds <= RESTRICTED_VOLUMES:
            found.append(f"volume {volume['name']} is {sorted(kinds)}")
    for c in pod.get("containers", []) + pod.get("initContainers", []):
        sc = c.get("securityContext") or {}
        name = c.get("name")
        if sc.get("privileged"):
            found.append(f"{name}: privileged")
        if sc.get("allowPrivilegeEscalation") is not False:
            found.append(f"{name}: allowPrivilegeEscalation is not false")
        if "ALL" not in ((sc.get("capabilities") or {}).get("drop") or []):
            found.append(f"{name}: capabilities do not drop ALL")
        if set((sc.get("capabilities") or {}).get("add") or []) - {"NET_BIND_SERVICE"}:
            found.append(f"{name}: adds capabilities")
        if not (sc.get("runAsNonRoot") or pod_sc.get("runAsNonRoot")):
            found.append(f"{name}: runAsNonRoot is not true")
        if 0 in (sc.get("runAsUser"), pod_sc.get("runAsUser")):
            found.append(f"{name}: runs as user 0")
        seccomp = (sc.get("seccompProfile") or pod_sc.get("seccompProfile") or {}).get("type")
        if seccomp not in ("RuntimeDefault", "Localhost"):
            found.append(f"{name}: seccompProfile is {seccomp!r}")
    return found


@pytest.mark.parametrize("path", MANIFESTS, ids=lambda p: p.name)
def test_every_manifest_is_valid_against_its_schema(path: Path) -> None:
    objects = _objects(path)
    assert objects, f"{path.name} holds no object"
    for obj in objects:
        validate_manifest(obj, f"docker/k8s/{path.name}")


def test_the_check_catches_a_misspelt_field_a_wrong_type_and_a_broken_flinkdeployment() -> None:
    [pvc] = _objects(DOCKER / "k8s" / "lake-pvc.yaml")
    typo = json.loads(json.dumps(pvc))
    typo["spec"]["accesModes"] = typo["spec"].pop("accessModes")
    with pytest.raises(AssertionError, match="accesModes"):
        validate_manifest(typo, "typo")
    role = next(o for o in _objects(DOCKER / "k8s" / "rbac.yaml") if o["kind"] == "Role")
    role["rules"][0]["verbs"] = "get"
    with pytest.raises(AssertionError, match="rules/0/verbs"):
        validate_manifest(role, "wrong type")
    [ysb] = _objects(DOCKER / "k8s" / "flinkdeployment-ysb.yaml")
    ysb["spec"]["job"]["upgradeMode"] = "sometimes"
    with pytest.raises(CRDValidationError, match=r"\$\.spec\.job\.upgradeMode"):
        validate_manifest(ysb, "broken")


def test_example_flinkdeployment_is_in_the_configuration_space() -> None:
    [ysb] = _objects(DOCKER / "k8s" / "flinkdeployment-ysb.yaml")
    assert default_space().contains(config_from_object(ysb))


def test_airflow_pods_and_trainer_pods_meet_pod_security_restricted() -> None:
    values = yaml.safe_load((DOCKER / "helm" / "values.yaml").read_text())
    contexts = values["securityContexts"]
    # The chart applies these to every Airflow pod and container it renders.
    airflow_pod = {"containers": [{"name": "airflow", "securityContext": contexts["containers"]}],
                   "volumes": values["workers"]["extraVolumes"]}  # fmt: skip
    assert restricted_violations(airflow_pod, contexts["pod"]) == []
    pod = ApiClient().sanitize_for_serialization(trainer_pod("surrogate", "ysb", TrainerPodConfig(image="reg/trainer:1")))
    assert restricted_violations(pod["spec"]) == []
    assert pod["spec"].get("automountServiceAccountToken") is False, "the trainer calls no Kubernetes API"
    # The check is not vacuous: a root, privileged container fails it.
    bad = {"containers": [{"name": "x", "securityContext": {"privileged": True, "runAsUser": 0}}], "hostNetwork": True,
           "volumes": [{"name": "h", "hostPath": {"path": "/"}}]}  # fmt: skip
    assert len(restricted_violations(bad)) == 8  # host network, hostPath, privileged, escalation, caps, root x2, seccomp
