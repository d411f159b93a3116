"""Every Kubernetes API call the shipped deployment can make, against docker/k8s/rbac.yaml.

The calls are found in the source (every ``<verb>_namespaced_<kind>`` / ``<verb>_cluster_<kind>``
call of the kubernetes client under flinktune/, jobs/, dags/, plugins/, models/, and in the modules
of the cncf.kubernetes provider that run its ``KubernetesPodOperator`` and ``SparkKubernetesOperator``
in the worker), mapped to the RBAC (API group, resource, verb) the API server checks and to the
namespace they run in, plus the calls Spark's driver makes for its executors. The identity that
makes flinktune's and the provider's calls is the Airflow workers' service account
(docker/helm/values.yaml); the Spark driver's is its own. Their Roles must grant exactly that set:
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
#: The provider's modules that run in the worker for the two operators (synchronous mode; the
#: deferrable mode's hooks are not used), all in flinktune's home namespace.
PROVIDER = Path(__import__("airflow.providers.cncf.kubernetes", fromlist=["_"]).__file__).parent
PROVIDER_MODULES = [
    "operators/pod.py",
    "utils/pod_manager.py",
    "operators/spark_kubernetes.py",
    "operators/custom_object_launcher.py",
]
PROVIDER_CALL = re.compile(r"\.([a-z]+(?:_get)?)_namespaced_([a-z_]+?)\(")
#: What the provider's client methods touch: its custom objects are SparkApplications.
PROVIDER_RESOURCE = {"pod": ("", "pods"), "pod_log": ("", "pods/log"), "event": ("", "events"),
                     "custom_object": ("sparkoperator.k8s.io", "sparkapplications"),
                     "custom_object_status": ("sparkoperator.k8s.io", "sparkapplications/status")}  # fmt: skip
#: Provider calls that cannot happen as flinktune runs the operators: pod exec serves only the XCom
#: sidecar (do_xcom_push=False: k8s_operators._COMMON) and killing an Istio sidecar (none).
PROVIDER_UNUSED = {("connect_get", "pod_exec")}
#: Spark 4.1's driver (read from the spark-kubernetes jar shipped in pyspark with javap): the
#: allocator creates executor pods, the watch and polling snapshot sources watch and list them, the
#: lifecycle manager gets and edits (get + patch) and deletes them, stop() deletes executors and
#: their ConfigMap by label (fabric8 7's label delete is one DELETE on the collection:
#: "deletecollection"), and the backend creates that ConfigMap. The driver Service delete is
#: switched off in the SparkApplication (spark_application.py: the Service is garbage-collected).
SPARK_DRIVER = {("", "pods", v) for v in ("get", "list", "watch", "create", "patch", "delete", "deletecollection")} | {
    ("", "configmaps", "create"), ("", "configmaps", "deletecollection")}  # fmt: skip
#: Cluster-wide calls: only ``flinktune fleet --kubernetes`` without ``--namespace``, an operator's
#: command run with their own kubeconfig; no flinktune identity is granted a ClusterRole.
OPERATOR_ONLY = {"flinktune/fleet/registry.py": {("cluster", "flink.apache.org", "flinkdeployments", "list")}}


def provider_calls() -> set[tuple[str, str, str]]:
    """(group, resource, verb) the provider's operators call in the worker; an unknown kind fails."""
    found = set()
    for module in PROVIDER_MODULES:
        for verb, kind in PROVIDER_CALL.findall((PROVIDER / module).read_text()):
            if (verb, kind) in PROVIDER_UNUSED:
                continue
            assert kind in PROVIDER_RESOURCE, f"{module} calls {verb}_namespaced_{kind}: map it to its RBAC resource"
            found.add((*PROVIDER_RESOURCE[kind], "get" if verb == "read" else verb))
    return found


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


def test_the_scan_finds_the_realizer_profiling_fleet_and_provider_calls() -> None:
    calls = code_calls()
    assert calls["flinktune/kubernetes/realizer.py"] == {("jobs", "flink.apache.org", "flinkdeployments", "get"),
                                                         ("jobs", "flink.apache.org", "flinkdeployments", "patch")}  # fmt: skip
    assert {v for *_, v in calls["flinktune/kubernetes/profiling.py"]} == {"create", "get", "delete"}
    assert ("jobs", "flink.apache.org", "flinkdeployments", "list") in calls["flinktune/fleet/registry.py"]
    # Pods and Spark jobs are the provider's operators now: flinktune itself makes no pod call.
    assert not [p for p, used in calls.items() if any(r.startswith("pods") for _, _, r, _ in used)]
    provider = provider_calls()
    assert {("", "pods", "create"), ("", "pods", "delete"), ("", "pods/log", "get"), ("", "pods", "list"),
            ("sparkoperator.k8s.io", "sparkapplications", "create")} <= provider  # fmt: skip


def test_the_workers_roles_grant_exactly_the_calls_the_deployment_makes() -> None:
    account, namespaces = deployment()
    needed = {(namespaces[s], g, r, v) for used in code_calls().values() for (s, g, r, v) in used if s != "cluster"}
    needed |= {(namespaces["home"], g, r, v) for g, r, v in provider_calls()}
    granted = grants(account)
    assert not needed - granted, f"calls {sorted(needed - granted)} are not granted to {account}"
    assert not granted - needed, f"{account} is granted {sorted(granted - needed)}, which no call uses"


def test_the_spark_driver_gets_exactly_what_it_calls_for_its_executors() -> None:
    from flinktune.settings import SparkSettings

    home = deployment()[1]["home"]
    assert grants(SparkSettings().driver_service_account) == {(home, g, r, v) for g, r, v in SPARK_DRIVER}


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
