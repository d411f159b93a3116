"""The provider's operators as flinktune builds them: the trainer pod rendered by KubernetesPodOperator
itself, and the ETL's SparkApplication as SparkKubernetesOperator submits it.

No cluster: the pod comes from the operator's own ``build_pod_request_obj(dry_run=True)`` and is
validated strictly against the Kubernetes schema (as tests/docker/test_k8s_manifests.py validates
the manifests); the SparkApplication goes through the provider's own launcher, then is checked
field by field (its CRD is not shipped here).
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import SimpleNamespace
from typing import Any, ClassVar
from urllib.parse import urlparse

import pytest
from kubernetes.client import ApiClient

from flinktune.orchestration.dag_tasks.k8s_operators import EtlSparkOperator, TrainerPodOperator, etl_spark_task, trainer_pod_task
from flinktune.orchestration.dag_tasks.spark_application import (
    IN_CLUSTER_MASTER,
    SPARK_IMAGE_VERSION,
    SparkApplicationError,
    spark_application,
)
from flinktune.orchestration.dag_tasks.trainer_pod import TrainerPodError
from tests.docker.test_k8s_manifests import restricted_violations, validate_manifest

ROOT = Path(__file__).resolve().parents[4]
SECRET_URI = "postgresql://mlflow:hunter2@db/mlflow"
PRODUCTION = {
    "FLINKTUNE_TRAINING": "kubernetes",
    "FLINKTUNE_SPARK_SUBMIT": "kubernetes",
    "FLINKTUNE_K8S_HOME_NAMESPACE": "flinktune",
    "FLINKTUNE_VAR_DIR": "/var/flinktune",
    "FLINKTUNE_TRAINER_IMAGE": "reg/flinktune-trainer:0.1.0",
    "FLINKTUNE_TRAINER_GPUS": "2",
    "FLINKTUNE_TRAINER_NODE_SELECTOR": '{"pool": "gpu-a100"}',
    "FLINKTUNE_SPARK_IMAGE": "reg/flinktune-spark-job:0.1.0",
    "FLINKTUNE_SPARK_CONF": '{"spark.executor.instances": 3, "spark.sql.shuffle.partitions": 8}',
    "FLINKTUNE_MLFLOW_TRACKING_URI": SECRET_URI,
    "FLINKTUNE_TRAINER_SECRET_REFS": '{"FLINKTUNE_MLFLOW_TRACKING_URI": "flinktune-mlflow:tracking-uri"}',
}


@pytest.fixture
def production(monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """The worker's environment as docker/helm/values.yaml sets it (and nothing else of flinktune's)."""
    import os

    for name in [n for n in os.environ if n.startswith("FLINKTUNE_")]:
        monkeypatch.delenv(name)
    for name, value in PRODUCTION.items():
        monkeypatch.setenv(name, value)
    return dict(PRODUCTION)


def _context(task_id: str) -> dict:
    """What the operators read of a task's context to label their pods (a run, a try)."""
    ti = SimpleNamespace(dag_id="flinktune_train", task_id=task_id, map_index=-1, try_number=1)
    return {"ti": ti, "run_id": "scheduled__2026-11-26T12:00:00+00:00", "dag": SimpleNamespace()}


def test_trainer_pods_map_over_the_fleets_targets_one_pod_per_job(production: dict) -> None:
    mapped = trainer_pod_task("forecaster", [{"job": "ysb"}, {"job": "tsw"}], retries=2)
    assert type(mapped).__name__ == "MappedOperator" and mapped.task_id == "train_forecaster"
    assert mapped.expand_input.value == {"target": [{"job": "ysb"}, {"job": "tsw"}]}
    # An instance trains its target's job, not the run's `job` param.
    op = TrainerPodOperator(task_id="train_forecaster", model="forecaster", target={"job": "tsw"})
    assert op.target == {"job": "tsw"} and op.job is None


def test_kubernetes_pod_operator_renders_the_trainer_pod_valid_restricted_and_without_secrets(production: dict) -> None:
    op = trainer_pod_task("surrogate", retries=2)
    assert isinstance(op, TrainerPodOperator) and op.task_id == "train_surrogate" and not op.do_xcom_push
    op.job = "ysb"
    pod = ApiClient().sanitize_for_serialization(op.build_pod_request_obj(_context("train_surrogate"), dry_run=True))
    validate_manifest(pod, "the trainer pod KubernetesPodOperator renders")
    assert SECRET_URI not in json.dumps(pod) and "hunter2" not in json.dumps(pod), "credentials only as references"
    spec, [container] = pod["spec"], pod["spec"]["containers"]
    assert restricted_violations(spec) == [] and spec["automountServiceAccountToken"] is False
    assert pod["metadata"]["namespace"] == "flinktune" and len(pod["metadata"]["name"]) <= 63
    assert pod["metadata"]["labels"]["flinktune/job"] == "ysb" and pod["metadata"]["labels"]["task_id"] == "train_surrogate"
    assert spec["serviceAccountName"] == "flinktune-trainer" and spec["restartPolicy"] == "Never"
    assert spec["nodeSelector"] == {"pool": "gpu-a100"}
    assert spec["tolerations"] == [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]
    assert spec["volumes"] == [{"name": "var", "persistentVolumeClaim": {"claimName": "flinktune-var"}}]
    assert container["name"] == op.base_container_name == "trainer", "the operator waits for and logs this container"
    assert container["volumeMounts"] == [{"name": "var", "mountPath": "/var/flinktune"}]
    assert container["command"] == ["python", "-m", "jobs.train_surrogate", "--job", "ysb"]
    assert container["resources"] == {"limits": {"cpu": "2", "memory": "8Gi", "nvidia.com/gpu": "2"},
                                      "requests": {"cpu": "2", "memory": "8Gi"}}  # fmt: skip
    env = {e["name"]: e for e in container["env"]}
    assert env["FLINKTUNE_MLFLOW_TRACKING_URI"]["valueFrom"] == {
        "secretKeyRef": {"name": "flinktune-mlflow", "key": "tracking-uri"}
    }
    assert env["FLINKTUNE_VAR_DIR"]["value"] == "/var/flinktune" and env["FLINKTUNE_DEVICE"]["value"] == "cuda"
    assert "FLINKTUNE_TRAINING" not in env


def test_the_trainer_operator_refuses_a_credential_without_reference_and_a_pod_without_job(production: dict, monkeypatch) -> None:
    with pytest.raises(TrainerPodError, match="unknown model 'gp'"):
        trainer_pod_task("gp")
    op = trainer_pod_task("forecaster")
    with pytest.raises(TrainerPodError, match="none is set"):
        op.build_pod_request_obj(None, dry_run=True)
    monkeypatch.delenv("FLINKTUNE_TRAINER_SECRET_REFS")
    op.job = "ysb"
    with pytest.raises(TrainerPodError, match="FLINKTUNE_MLFLOW_TRACKING_URI: a credential is never copied"):
        op.build_pod_request_obj(None, dry_run=True)


def test_spark_kubernetes_operator_submits_a_restricted_spark_application_on_the_lake(production: dict) -> None:
    from airflow.providers.cncf.kubernetes.operators.custom_object_launcher import CustomObjectLauncher

    op = etl_spark_task()
    assert isinstance(op, EtlSparkOperator) and op.task_id == "etl_features" and op.window == {}
    op.job, op.window = "ysb", {"job": "ysb", "start_ms": 1000, "end_ms": 2000}
    # The provider's own launcher turns the template into the object it creates.
    launcher = CustomObjectLauncher(name="flinktune-etl-ysb-x1", namespace="flinktune", kube_client=None,
                                    custom_obj_api=None, template_body=op.template_body)  # fmt: skip
    assert (launcher.api_group, launcher.api_version, launcher.plural) == ("sparkoperator.k8s.io", "v1beta2", "sparkapplications")
    app = launcher.body
    assert app["kind"] == "SparkApplication" and app["metadata"]["name"] == "flinktune-etl-ysb-x1"
    spec = app["spec"]
    assert {"driver", "executor", "mainApplicationFile", "sparkVersion", "type"} <= set(spec), "the CRD's required fields"
    assert (spec["type"], spec["mode"], spec["image"]) == ("Python", "cluster", "reg/flinktune-spark-job:0.1.0")
    assert spec["mainApplicationFile"] == "local:///opt/flinktune/jobs/etl_features.py"
    assert spec["arguments"] == ["--job", "ysb", "--start-ms", "1000", "--end-ms", "2000"]
    assert spec["restartPolicy"] == {"type": "Never"}, "Airflow retries the task"
    assert all(isinstance(v, str) for v in spec["sparkConf"].values()), "sparkConf is a map of strings"
    assert spec["sparkConf"]["spark.sql.shuffle.partitions"] == "8" and spec["executor"]["instances"] == 3
    assert spec["volumes"] == [{"name": "var", "persistentVolumeClaim": {"claimName": "flinktune-var"}}]
    assert (
        spec["driver"]["serviceAccount"] == "flinktune-spark-driver" and spec["executor"]["serviceAccount"] == "flinktune-spark"
    )
    for role in ("driver", "executor"):
        side = spec[role]
        assert side["volumeMounts"] == [{"name": "var", "mountPath": "/var/flinktune"}], role
        env = {e["name"]: e["value"] for e in side["env"]}
        assert env["FLINKTUNE_VAR_DIR"] == "/var/flinktune" and env["FLINKTUNE_SPARK_MASTER"] == IN_CLUSTER_MASTER, role
        assert not {"FLINKTUNE_MLFLOW_TRACKING_URI", "FLINKTUNE_SPARK_SUBMIT"} & set(env), role
        as_pod = {"containers": [{"name": role, "securityContext": side["securityContext"]}], "volumes": spec["volumes"]}
        assert restricted_violations(as_pod, side["podSecurityContext"]) == [], role
    assert SECRET_URI not in json.dumps(app)


def test_the_spark_application_names_its_missing_image_and_matches_the_spark_image() -> None:
    with pytest.raises(SparkApplicationError, match="needs FLINKTUNE_SPARK_IMAGE"):
        spark_application("ysb", environ={})
    with pytest.raises(SparkApplicationError, match=r"spark\.executor\.instances must be an integer"):
        spark_application(
            "ysb", environ={"FLINKTUNE_SPARK_IMAGE": "x:1", "FLINKTUNE_SPARK_CONF": '{"spark.executor.instances": "many"}'}
        )
    # The job's image runs the pinned pyspark as its SPARK_HOME: sparkVersion must be that Spark.
    pinned = re.search(r'"pyspark==(\S+)"', (ROOT / "pyproject.toml").read_text())
    image = (ROOT / "docker" / "Dockerfile.spark-job").read_text()
    assert pinned and pinned.group(1) == SPARK_IMAGE_VERSION, "sparkVersion must be the Spark of the job's image"
    assert "SPARK_HOME=/usr/local/lib/python3.11/site-packages/pyspark" in image


# --- The operators' own calls, run for real against a recording stand-in of the API server ---------


class _RecordingApiServer(BaseHTTPRequestHandler):
    """Answers what the two operators ask (pods, their log, SparkApplications) and records each request.

    A created pod has ended at once (``phase``: Succeeded or Failed); a created SparkApplication
    has a driver pod that ended the same way. Class attributes are reset by :func:`_serve`.
    """

    calls: ClassVar[list[tuple[str, str, str]]] = []
    bodies: ClassVar[list[dict]] = []
    pods: ClassVar[dict[str, dict]] = {}
    apps: ClassVar[dict[str, dict]] = {}
    phase = "Succeeded"

    def log_message(self, *args: object) -> None:  # keep the test output quiet
        pass

    def _send(self, obj: object, code: int = 200, ctype: str = "application/json") -> None:
        data = obj if isinstance(obj, bytes) else json.dumps(obj).encode()
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _record(self) -> tuple[str, list[str]]:
        url = urlparse(self.path)
        self.calls.append((self.command, url.path, url.query))
        return url.path, url.path.strip("/").split("/")

    def _ended(self, pod: dict) -> dict:
        failed = self.phase == "Failed"
        state = {"exitCode": int(failed), "reason": "Error" if failed else "Completed", "startedAt": _T0, "finishedAt": _T0}
        pod["metadata"]["creationTimestamp"] = _T0
        pod["status"] = {"phase": self.phase, "startTime": _T0, "containerStatuses": [
            {"name": pod["spec"]["containers"][0]["name"], "ready": False, "restartCount": 0, "image": "i", "imageID": "i",
             "state": {"terminated": state}}]}  # fmt: skip
        self.pods[pod["metadata"]["name"]] = pod
        return pod

    def do_GET(self) -> None:
        path, parts = self._record()
        if parts[-1] in ("pods", "events"):
            return self._send({"kind": "List", "apiVersion": "v1", "metadata": {}, "items": []})
        if parts[-1] == "log":
            return self._send(f'{_T0} {{"model_name": "m", "version": "3"}}\n'.encode(), ctype="text/plain")
        if "sparkapplications" in path:
            return self._send({**self.apps[parts[-2]], "status": {"applicationState": {"state": "RUNNING"}}})
        return self._send(self.pods[parts[-1]]) if parts[-1] in self.pods else self._send({"kind": "Status"}, 404)

    def do_POST(self) -> None:
        path, _ = self._record()
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self.bodies.append(json.loads(json.dumps(body)))
        if path.endswith("/sparkapplications"):
            self.apps[body["metadata"]["name"]] = body
            labels = body["spec"]["driver"]["labels"]
            self._ended({"metadata": {"name": f"{body['metadata']['name']}-driver", "namespace": "flinktune", "labels": labels},
                         "spec": {"containers": [{"name": "spark-kubernetes-driver", "image": "i"}]}})  # fmt: skip
            return self._send(body, 201)
        return self._send(self._ended(body), 201)

    def do_PATCH(self) -> None:
        _, parts = self._record()
        self.rfile.read(int(self.headers["Content-Length"]))
        return self._send(self.pods[parts[-1]])

    def do_DELETE(self) -> None:
        path, parts = self._record()
        return self._send((self.apps if "sparkapplications" in path else self.pods).pop(parts[-1], {}))


_T0 = "2026-11-26T12:00:00Z"


@pytest.fixture
def api_server() -> Iterator[tuple[type[_RecordingApiServer], Any]]:
    """The recording server on a free local port, and a kubernetes ApiClient pointed at it."""
    from kubernetes import client

    handler = type("Recorder", (_RecordingApiServer,), {"calls": [], "bodies": [], "pods": {}, "apps": {}})
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    httpd.daemon_threads = True
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    config = client.Configuration()
    config.host = f"http://127.0.0.1:{httpd.server_address[1]}"
    try:
        yield handler, client.ApiClient(config)
    finally:
        httpd.shutdown()
        httpd.server_close()


def _rbac(method: str, path: str, query: str) -> tuple[str, str, str, str]:
    """(namespace, API group, resource, verb) the API server checks for one request."""
    parts = path.strip("/").split("/")
    group, rest = ("", parts[2:]) if parts[0] == "api" else (parts[1], parts[3:])
    namespace, resource, name, sub = rest[1], rest[2], rest[3] if len(rest) > 3 else None, rest[4] if len(rest) > 4 else None
    if method == "GET":
        verb = "watch" if "watch=true" in query.lower() else ("get" if name else "list")
    else:
        verb = {"POST": "create", "PATCH": "patch", "PUT": "update", "DELETE": "delete" if name else "deletecollection"}[method]
    return namespace, group, f"{resource}/{sub}" if sub else resource, verb


def _run(op: Any, api_client: Any, monkeypatch: pytest.MonkeyPatch, xcom: Any = None) -> tuple[Any, list]:
    """Run ``op.execute`` as the worker would, its API clients pointed at the recording server."""
    from kubernetes import client

    from flinktune.orchestration.dag_tasks import k8s_operators

    marked: list = []
    monkeypatch.setattr(k8s_operators, "task_params", lambda params: dict(params))  # Airflow's checks: tests/dags
    monkeypatch.setattr(k8s_operators, "mark_outlets", lambda job, *assets: marked.append((job, [a.uri for a in assets])))
    core = client.CoreV1Api(api_client)
    hook = SimpleNamespace(is_in_cluster=True, core_v1_client=core, get_namespace=lambda: None)
    op.__dict__.update(client=core, hook=hook, custom_obj_api=client.CustomObjectsApi(api_client))
    pushed: dict = {}
    ti = SimpleNamespace(dag_id="flinktune_x", task_id=op.task_id, map_index=-1, try_number=1,
                         xcom_push=lambda key, value: pushed.update({key: value}), xcom_pull=lambda task_ids: xcom)  # fmt: skip
    context = {"ti": ti, "task_instance": ti, "run_id": "manual__2026", "dag": SimpleNamespace(),
               "params": {"job": "ysb", "start_ms": None, "end_ms": None}}  # fmt: skip
    return op.execute(context), marked


def test_the_operators_calls_against_an_api_server_are_exactly_granted_to_the_worker(
    production: dict, api_server: tuple, monkeypatch: pytest.MonkeyPatch
) -> None:
    from airflow.providers.common.compat.sdk import AirflowException

    from tests.docker.test_rbac_covers_calls import deployment, grants

    server, api_client = api_server
    granted = grants(deployment()[0])
    # The trainer pod: found (none to reattach to), created, read, its log streamed, deleted.
    _, marked = _run(trainer_pod_task("surrogate"), api_client, monkeypatch)
    [created] = [c for c in server.calls if c[0] == "POST"]
    assert created[1] == "/api/v1/namespaces/flinktune/pods" and marked == [("ysb", ["flinktune://models/champions"])]
    [pod] = server.bodies
    validate_manifest(pod, "the trainer pod as POSTed")  # what the API server received, not just what was built
    assert restricted_violations(pod["spec"]) == [] and SECRET_URI not in json.dumps(pod)
    assert [c[0] for c in server.calls].count("DELETE") == 1, "the pod is deleted at the end"
    # A failed trainer pod fails the task, and is deleted too.
    server.phase = "Failed"
    with pytest.raises(AirflowException):
        _run(trainer_pod_task("forecaster"), api_client, monkeypatch)
    assert server.calls[-1][0] == "DELETE" and not server.pods
    # The ETL: the SparkApplication created on the window collect returned (one mapped instance),
    # its status read, its driver followed, deleted.
    server.phase = "Succeeded"
    _, marked = _run(EtlSparkOperator(task_id="etl_features", window={"job": "ysb", "start_ms": 5, "end_ms": 9}),
                     api_client, monkeypatch)  # fmt: skip
    posted = [c for c in server.calls if c[0] == "POST" and "sparkapplications" in c[1]]
    assert posted == [("POST", "/apis/sparkoperator.k8s.io/v1beta2/namespaces/flinktune/sparkapplications", "")]
    assert not server.apps and marked == [("ysb", ["flinktune://lake/features_10s", "flinktune://lake/features_1m"])]
    app = server.bodies[-1]
    assert app["kind"] == "SparkApplication" and app["spec"]["arguments"] == ["--job", "ysb", "--start-ms", "5", "--end-ms", "9"]
    assert app["spec"]["driver"]["labels"]["task_id"] == "etl_features", "labels the operator finds the driver by"
    needed = {_rbac(*c) for c in server.calls}
    assert not needed - granted, f"the operators call {sorted(needed - granted)}, not granted to the worker"
    assert {r for _, _, r, _ in needed} == {"pods", "pods/log", "sparkapplications", "sparkapplications/status"}
