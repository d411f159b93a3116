"""Every Kubernetes API call the shipped deployment can make, against docker/k8s/rbac.yaml (issue 21).

The calls are found in the source (every ``<verb>_namespaced_<kind>`` / ``<verb>_cluster_<kind>``
call of the kubernetes client under flinktune/, jobs/, dags/, plugins/, models/), mapped to the RBAC
(API group, resource, verb) the API server checks and to the namespace they run in, plus the calls
Spark's driver makes in client mode inside the worker. The identity that makes them all is the
Airflow workers' service account (docker/helm/values.yaml); its Roles must grant exactly that set:
a missing grant fails, and so does one no call uses.
"""

from __future__ import annotations

import re
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
CALL = re.compile(r"\.(get|list|patch|create|delete|read|replace)_(namespaced|cluster)_(custom_object|pod_status|pod_log|pod)\(")
#: client method -> (API group, resource, namespace it runs in: the Flink jobs' or flinktune's home).
RESOURCE = {"custom_object": ("flink.apache.org", "flinkdeployments", "jobs"), "pod": ("", "pods", "home"),
            "pod_status": ("", "pods/status", "home"), "pod_log": ("", "pods/log", "home")}  # fmt: skip
#: Spark 4.1's driver in client mode (FLINKTUNE_SPARK_SUBMIT=client, so inside the worker), read from
#: the spark-kubernetes jar shipped in pyspark (javap): the allocator creates executor pods, the
#: watch and polling snapshot sources watch and list them, the lifecycle manager gets and edits
#: (get + patch) and deletes them, stop() deletes executors and their ConfigMap by label (fabric8
#: 7's label delete is one DELETE on the collection: "deletecollection"), and the backend creates
#: that ConfigMap. The driver Service delete is switched off in values.yaml (client mode makes none).
SPARK_CLIENT_DRIVER = {("", "pods", v) for v in ("get", "list", "watch", "create", "patch", "delete", "deletecollection")} | {
    ("", "configmaps", "create"), ("", "configmaps", "deletecollection")}  # fmt: skip
#: Cluster-wide calls: only ``flinktune fleet --kubernetes`` without ``--namespace``, an operator's
#: command run with their own kubeconfig; no flinktune identity is granted a ClusterRole.
OPERATOR_ONLY = {"flinktune/fleet/registry.py": {("cluster", "flink.apache.org", "flinkdeployments", "list")}}


def code_calls() -> dict[str, set[tuple[str, str, str, str]]]:
    """(scope, group, resource, verb) per source file that calls the Kubernetes API; scope is the
    namespace kind ("jobs" or "home") or "cluster"."""
    found: dict[str, set[tuple[str, str, str, str]]] = {}
    for top in ("flinktune", "jobs", "dags", "plugins", "models"):
        for path in sorted((ROOT / top).rglob("*.py")):
            for verb, scope, kind in CALL.findall(path.read_text()):
                group, resource, namespace = RESOURCE[kind]
                where = "cluster" if scope == "cluster" else namespace
                found.setdefault(str(path.relative_to(ROOT)), set()).add(
                    (where, group, resource, "get" if verb == "read" else verb)
                )
    return found


def deployment() -> tuple[str, dict[str, str]]:
    """The workers' service account and the namespace of each kind, from docker/helm/values.yaml."""
    values = yaml.safe_load((ROOT / "docker" / "helm" / "values.yaml").read_text())
    env = {e["name"]: e["value"] for e in values["env"]}
    return values["workers"]["serviceAccount"]["name"], {
        "jobs": env["FLINKTUNE_K8S_NAMESPACE"],
        "home": env["FLINKTUNE_K8S_HOME_NAMESPACE"],
    }


def grants(account: str) -> set[tuple[str, str, str, str]]:
    """(namespace, group, resource, verb) the Roles bound to ``account`` grant."""
    docs = [d for d in yaml.safe_load_all((ROOT / "docker" / "k8s" / "rbac.yaml").read_text()) if d]
    assert not [d for d in docs if d["kind"].startswith("Cluster")], "no ClusterRole or ClusterRoleBinding"
    roles = {(d["metadata"]["namespace"], d["metadata"]["name"]): d for d in docs if d["kind"] == "Role"}
    out = set()
    for b in (d for d in docs if d["kind"] == "RoleBinding"):
        if not any(s["kind"] == "ServiceAccount" and s["name"] == account for s in b["subjects"]):
            continue
        ns = b["metadata"]["namespace"]
        for rule in roles[(ns, b["roleRef"]["name"])]["rules"]:
            out |= {(ns, g, r, v) for g in rule["apiGroups"] for r in rule["resources"] for v in rule["verbs"]}
    return out


def test_the_scan_finds_the_realizer_profiling_trainer_and_fleet_calls() -> None:
    calls = code_calls()
    assert calls["flinktune/kubernetes/realizer.py"] == {("jobs", "flink.apache.org", "flinkdeployments", "get"),
                                                         ("jobs", "flink.apache.org", "flinkdeployments", "patch")}  # fmt: skip
    assert {v for *_, v in calls["flinktune/kubernetes/profiling.py"]} == {"create", "get", "delete"}
    assert calls["flinktune/orchestration/dag_tasks/trainer_pod.py"] == {("home", "", "pods", "create"), ("home", "", "pods", "delete"),
                                                               ("home", "", "pods/status", "get"), ("home", "", "pods/log", "get")}  # fmt: skip
    assert ("jobs", "flink.apache.org", "flinkdeployments", "list") in calls["flinktune/fleet/registry.py"]


def test_the_workers_roles_grant_exactly_the_calls_the_deployment_makes() -> None:
    account, namespaces = deployment()
    needed = {(namespaces[s], g, r, v) for used in code_calls().values() for (s, g, r, v) in used if s != "cluster"}
    needed |= {(namespaces["home"], g, r, v) for g, r, v in SPARK_CLIENT_DRIVER}
    granted = grants(account)
    assert not needed - granted, f"calls {sorted(needed - granted)} are not granted to {account}"
    assert not granted - needed, f"{account} is granted {sorted(granted - needed)}, which no call uses"


def test_cluster_wide_calls_are_only_the_operators_and_the_pods_identities_have_no_rights() -> None:
    cluster = {p: {c for c in used if c[0] == "cluster"} for p, used in code_calls().items()}
    assert {p: c for p, c in cluster.items() if c} == OPERATOR_ONLY
    docs = [d for d in yaml.safe_load_all((ROOT / "docker" / "k8s" / "rbac.yaml").read_text()) if d]
    accounts = {d["metadata"]["name"]: d for d in docs if d["kind"] == "ServiceAccount"}
    from flinktune.settings import SparkSettings, TrainerSettings

    for name in (TrainerSettings().service_account, SparkSettings().service_account):
        assert accounts[name]["automountServiceAccountToken"] is False, f"{name} needs no API token"
        assert grants(name) == set(), f"{name} calls no Kubernetes API"
    account, _ = deployment()
    assert account in accounts and accounts[account]["metadata"]["namespace"] == deployment()[1]["home"]
