"""The provider's operators as flinktune builds them: the trainer pod rendered by KubernetesPodOperator
itself, and the ETL's SparkApplication as SparkKubernetesOperator submits it (issue 22).

No cluster: the pod comes from the operator's own ``build_pod_request_obj(dry_run=True)`` and is
validated strictly against the Kubernetes schema (as tests/docker/test_k8s_manifests.py validates
the manifests); the SparkApplication goes through the provider's own launcher, then is checked
field by field (its CRD is not shipped here).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from types import SimpleNamespace

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
    assert env["FLINKTUNE_MLFLOW_TRACKING_URI"]["valueFrom"] == {"secretKeyRef": {"name": "flinktune-mlflow", "key": "tracking-uri"}}
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
    assert isinstance(op, EtlSparkOperator) and op.task_id == "etl_features" and op.window_task == "simulate"
    op.job, op.window = "ysb", {"start_ms": 1000, "end_ms": 2000}
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
    assert spec["driver"]["serviceAccount"] == "flinktune-spark-driver" and spec["executor"]["serviceAccount"] == "flinktune-spark"
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
        spark_application("ysb", environ={"FLINKTUNE_SPARK_IMAGE": "x:1", "FLINKTUNE_SPARK_CONF": '{"spark.executor.instances": "many"}'})
    base = re.search(r"^FROM apache/spark:(\S+)-python3$", (ROOT / "docker" / "Dockerfile.spark-job").read_text(), re.M)
    assert base and base.group(1) == SPARK_IMAGE_VERSION, "sparkVersion must be the Spark of the job's image"
