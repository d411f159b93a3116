"""Local versus production switches: back-end variables, the GPU trainer pod's spec, spark-submit, realizer."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest
from kubernetes.client import ApiClient

from flinktune.backends.choice import BackendError, Backends, load_backends
from flinktune.backends.cluster import make_realizer
from flinktune.config_space import ConfigError
from flinktune.orchestration.dag_tasks.spark_submit import IMAGE_APP, SparkSubmitError, spark_submit_command
from flinktune.orchestration.dag_tasks.tasks import suggest_profile_configs
from flinktune.orchestration.dag_tasks.trainer_pod import TrainerPodConfig, TrainerPodError, trainer_pod


def test_defaults_are_the_embedded_setup_and_bad_values_name_the_variable() -> None:
    assert load_backends({}) == Backends("twin", "in_process", "") and load_backends({}).is_embedded
    assert load_backends({"FLINKTUNE_CLUSTER": "Kubernetes", "FLINKTUNE_SPARK_SUBMIT": "cluster"}).cluster == "kubernetes"
    assert load_backends({"FLINKTUNE_SPARK_SUBMIT": "Kubernetes"}).spark_submit == "kubernetes"
    with pytest.raises(BackendError, match=r"FLINKTUNE_TRAINING='gpu': must be 'in_process' or 'kubernetes'"):
        load_backends({"FLINKTUNE_TRAINING": "gpu"})


def test_the_dag_files_read_the_switches_as_load_backends_does() -> None:
    from typing import get_args

    from flinktune.orchestration.dag_tasks.dag_wiring import _DAG_BACKENDS, backends
    from flinktune.settings import BackendSettings

    fields = BackendSettings.model_fields
    assert _DAG_BACKENDS["FLINKTUNE_TRAINING"] == get_args(fields["training"].annotation)
    assert _DAG_BACKENDS["FLINKTUNE_SPARK_SUBMIT"] == get_args(fields["spark_submit"].annotation)
    for env in (
        {},
        {"FLINKTUNE_TRAINING": " Kubernetes", "FLINKTUNE_SPARK_SUBMIT": "KUBERNETES"},
        {"FLINKTUNE_SPARK_SUBMIT": "client"},
    ):
        wanted = load_backends(env)
        assert backends(env) == (wanted.training, wanted.spark_submit), env
    with pytest.raises(ValueError, match="FLINKTUNE_SPARK_SUBMIT='k8s': must be '' or 'client' or 'cluster' or 'kubernetes'"):
        backends({"FLINKTUNE_SPARK_SUBMIT": "k8s"})
    with pytest.raises(BackendError):
        load_backends({"FLINKTUNE_SPARK_SUBMIT": "k8s"})


def test_trainer_pod_requests_gpus_on_gpu_nodes_and_is_a_valid_v1_pod() -> None:
    env = {
        "FLINKTUNE_TRAINER_IMAGE": "reg/flinktune-trainer:0.1.0",
        "FLINKTUNE_TRAINER_GPUS": "2",
        "FLINKTUNE_TRAINER_NODE_SELECTOR": '{"pool": "gpu-a100"}',
        "FLINKTUNE_TRAINER_SECRET": "s3-creds",
        "FLINKTUNE_MLFLOW_TRACKING_URI": "postgresql://mlflow",
        "FLINKTUNE_TRAINING": "kubernetes",
        "HOME": "/root",
    }
    pod = trainer_pod("surrogate", "wordcount", TrainerPodConfig.from_env(env), run_key="scheduled__2025")
    client = ApiClient()
    body = client.sanitize_for_serialization(pod)
    # kubernetes 36's deserialize takes a response (its .data); 37's took the text and a content type.
    again = client.sanitize_for_serialization(client.deserialize(SimpleNamespace(data=json.dumps(body)), "V1Pod"))
    assert again == body, "the pod survives the client's own (de)serialisation unchanged"
    spec, [container] = body["spec"], body["spec"]["containers"]
    assert spec["nodeSelector"] == {"pool": "gpu-a100"} and spec["restartPolicy"] == "Never"
    assert spec["tolerations"] == [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]
    assert container["resources"]["limits"]["nvidia.com/gpu"] == "2"
    assert container["command"] == ["python", "-m", "jobs.train_surrogate", "--job", "wordcount"]
    env_out = {e["name"]: e.get("value") for e in container["env"]}
    assert env_out["FLINKTUNE_DEVICE"] == "cuda"
    assert "postgresql://mlflow" not in json.dumps(body), "the MLflow URI (a credential) comes from the Secret, never the spec"
    assert "FLINKTUNE_TRAINING" not in env_out and "HOME" not in env_out
    assert container["envFrom"] == [{"secretRef": {"name": "s3-creds"}}]
    assert len(body["metadata"]["name"]) <= 63


def test_trainer_pod_takes_credentials_only_as_references_and_mounts_the_lake() -> None:
    env = {
        "FLINKTUNE_TRAINER_IMAGE": "reg/t:1",
        "FLINKTUNE_VAR_DIR": "/var/flinktune",
        "FLINKTUNE_MLFLOW_TRACKING_URI": "postgresql://mlflow:hunter2@db/mlflow",
        "FLINKTUNE_PROMETHEUS_PASSWORD": "hunter3",
        "FLINKTUNE_PROMETHEUS_USER": "flinktune",
        "FLINKTUNE_TRAINER_SECRET_REFS": json.dumps(
            {"FLINKTUNE_MLFLOW_TRACKING_URI": "flinktune-db:mlflow-url", "FLINKTUNE_PROMETHEUS_PASSWORD": "prometheus:password"}
        ),
    }
    body = ApiClient().sanitize_for_serialization(trainer_pod("forecaster", "wordcount", TrainerPodConfig.from_env(env)))
    text = json.dumps(body)
    assert "hunter2" not in text and "hunter3" not in text
    [container] = body["spec"]["containers"]
    env_out = {e["name"]: e for e in container["env"]}
    assert env_out["FLINKTUNE_MLFLOW_TRACKING_URI"] == {
        "name": "FLINKTUNE_MLFLOW_TRACKING_URI",
        "valueFrom": {"secretKeyRef": {"name": "flinktune-db", "key": "mlflow-url"}},
    }
    assert env_out["FLINKTUNE_PROMETHEUS_PASSWORD"]["valueFrom"]["secretKeyRef"] == {"name": "prometheus", "key": "password"}
    assert env_out["FLINKTUNE_PROMETHEUS_USER"]["value"] == "flinktune"  # not a credential: copied
    # The lake: the state volume mounted where FLINKTUNE_VAR_DIR points.
    assert container["volumeMounts"] == [{"name": "var", "mountPath": "/var/flinktune"}]
    assert body["spec"]["volumes"] == [{"name": "var", "persistentVolumeClaim": {"claimName": "flinktune-var"}}]
    assert env_out["FLINKTUNE_VAR_DIR"]["value"] == "/var/flinktune"
    # A credential with no reference for the pod is refused, not copied and not silently dropped.
    del env["FLINKTUNE_TRAINER_SECRET_REFS"]
    with pytest.raises(
        TrainerPodError, match="FLINKTUNE_MLFLOW_TRACKING_URI, FLINKTUNE_PROMETHEUS_PASSWORD: a credential is never copied"
    ):
        TrainerPodConfig.from_env(env)


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({}, "needs FLINKTUNE_TRAINER_IMAGE"),
        ({"FLINKTUNE_TRAINER_IMAGE": "x:1", "FLINKTUNE_TRAINER_GPUS": "one"}, "FLINKTUNE_TRAINER_GPUS='one'"),
        (
            {"FLINKTUNE_TRAINER_IMAGE": "x:1", "FLINKTUNE_TRAINER_TOLERATIONS": "{"},
            "FLINKTUNE_TRAINER_TOLERATIONS='{': not valid JSON",
        ),
        (
            {"FLINKTUNE_TRAINER_IMAGE": "x:1", "FLINKTUNE_TRAINER_NODE_SELECTOR": "[]"},
            "FLINKTUNE_TRAINER_NODE_SELECTOR='.*': must be a JSON object, got list",
        ),
        (
            {"FLINKTUNE_TRAINER_IMAGE": "x:1", "FLINKTUNE_TRAINER_SECRET_REFS": '{"FLINKTUNE_MLFLOW_TRACKING_URI": "db"}'},
            "expected 'secret-name:key'",
        ),
    ],
)
def test_trainer_pod_config_errors_name_the_variable(env: dict, message: str) -> None:
    with pytest.raises(TrainerPodError, match=message.replace("(", r"\(")):
        TrainerPodConfig.from_env(env)


def test_spark_submit_goes_to_a_standalone_cluster_and_refuses_kubernetes() -> None:
    env = {"FLINKTUNE_SPARK_CONF": '{"spark.executor.instances": 3}'}
    cmd = spark_submit_command("demo", master="spark://127.0.0.1:7077", deploy_mode="cluster", start_ms=5, environ=env)
    assert Path(cmd[0]).name == "spark-submit" and Path(cmd[0]).exists()
    joined = " ".join(cmd)
    assert "--master spark://127.0.0.1:7077 --deploy-mode cluster" in joined and "spark.executor.instances=3" in joined
    assert cmd[-5:] == [IMAGE_APP, "--job", "demo", "--start-ms", "5"]
    # Spark on Kubernetes is a SparkApplication run by SparkKubernetesOperator, not spark-submit from the worker.
    with pytest.raises(SparkSubmitError, match="set FLINKTUNE_SPARK_SUBMIT=kubernetes"):
        spark_submit_command("demo", master="k8s://https://k8s:6443", deploy_mode="client", environ={})
    with pytest.raises(SparkSubmitError, match="cluster master"):
        spark_submit_command("demo", master="local[2]", deploy_mode="cluster", environ={})


def test_make_realizer_picks_twin_or_kubernetes_by_environment() -> None:
    with pytest.raises(BackendError, match="has no twin"):
        make_realizer("demo", environ={})
    with pytest.raises(BackendError, match="needs FLINKTUNE_K8S_NAMESPACE"):
        make_realizer("demo", environ={"FLINKTUNE_CLUSTER": "kubernetes"})
    realizer = make_realizer(
        "demo",
        api=object(),
        environ={
            "FLINKTUNE_CLUSTER": "kubernetes",
            "FLINKTUNE_K8S_NAMESPACE": "flink-jobs",
            "FLINKTUNE_VERTEX_IDS": '{"source": "abc"}',
        },
    )
    assert type(realizer).__name__ == "KubernetesRealizer"
    assert realizer.namespace == "flink-jobs" and realizer.vertex_ids == {"source": "abc"}


def test_suggested_configs_are_checked_against_the_space_and_the_budget() -> None:
    good = {"parallelism": 8, "task_slots": 2, "cpu": 1.0, "memory_mb": 2048, "checkpoint_interval_s": 30}
    assert suggest_profile_configs("demo", [good], max_runs=1, seed=0) == [good]
    assert len(suggest_profile_configs("demo", [], max_runs=3, seed=0)) == 3
    with pytest.raises(ValueError, match="2 configurations exceed the budget max_runs=1"):
        suggest_profile_configs("demo", [good, good], max_runs=1, seed=0)
    with pytest.raises(ConfigError, match=r"param configs\[0\].*not in the configuration space"):
        suggest_profile_configs("demo", [{**good, "parallelism": 9}], max_runs=1, seed=0)
