"""The metric ETL as a SparkApplication: Spark on Kubernetes through the Spark operator.

Use :func:`spark_application` to build the ``sparkoperator.k8s.io/v1beta2`` SparkApplication that
runs ``jobs/etl_features.py`` for one job; ``SparkKubernetesOperator`` submits it and follows its
driver (:func:`flinktune.orchestration.dag_tasks.k8s_operators.etl_spark_task`, with
``FLINKTUNE_SPARK_SUBMIT=kubernetes``). The cluster needs the Kubeflow Spark operator
(``sparkoperator.k8s.io``). Variables:

- ``FLINKTUNE_SPARK_IMAGE``: image of ``docker/Dockerfile.spark-job`` (required).
- ``FLINKTUNE_K8S_HOME_NAMESPACE`` (``flinktune``): where the application, its pods and the lake's
  volume claim live.
- ``FLINKTUNE_SPARK_DRIVER_SERVICE_ACCOUNT`` (``flinktune-spark-driver``: creates and deletes its
  executor pods, docker/k8s/rbac.yaml) and ``FLINKTUNE_SPARK_SERVICE_ACCOUNT`` (``flinktune-spark``:
  the executors, no API rights).
- ``FLINKTUNE_SPARK_CONF``: JSON object of Spark properties (``spark.executor.instances`` sets the
  executor count, default 2).
- ``FLINKTUNE_TRAINER_VAR_PVC`` (``flinktune-var``): the claim holding the lake, mounted at the
  worker's ``FLINKTUNE_VAR_DIR`` in the driver and the executors, as in the trainer pod.

The driver and executors get the worker's ``FLINKTUNE_*`` variables except the back-end switches
and credentials (:func:`~flinktune.orchestration.dag_tasks.trainer_pod.passed_env`): the ETL reads
and writes the lake and needs none. Both run as Pod Security "restricted" requires.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from flinktune.orchestration.dag_tasks.spark_submit import IMAGE_APP  # the ETL inside docker/Dockerfile.spark-job's image
from flinktune.orchestration.dag_tasks.trainer_pod import passed_env
from flinktune.settings import KubernetesSettings, SettingsError, SparkSettings, TrainerSettings, read_group, worker_var_dir

__all__ = ["API_VERSION", "IMAGE_APP", "IN_CLUSTER_MASTER", "SPARK_IMAGE_VERSION", "SparkApplicationError", "spark_application"]

API_VERSION = "sparkoperator.k8s.io/v1beta2"
SPARK_IMAGE_VERSION = "4.1.4"
"""Spark in docker/Dockerfile.spark-job's image: the pinned pyspark is its SPARK_HOME (a test checks the two agree)."""
IN_CLUSTER_MASTER = "k8s://https://kubernetes.default.svc"
"""The master the driver's session names: the ETL builds its session from FLINKTUNE_SPARK_MASTER, and
that must be the cluster it runs in, whatever the worker's own master is."""
_SPARK_UID = 185  # the `spark` user of the apache/spark images: runAsNonRoot needs a numeric id
_RESTRICTED_CONTAINER = {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}, "runAsNonRoot": True}
_DEFAULT_VAR_DIR = "/var/flinktune"


class SparkApplicationError(ValueError):
    """The SparkApplication cannot be built from the settings; the message names the variable."""


def spark_application(
    job: str,
    *,
    start_ms: int | None = None,
    end_ms: int | None = None,
    environ: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """The SparkApplication (a JSON-ready dict, no name: the operator names it per run) running the ETL for ``job``."""
    env = os.environ if environ is None else environ
    try:
        spark = read_group(SparkSettings, env)
        k8s = read_group(KubernetesSettings, env)
        var_pvc = read_group(TrainerSettings, env).var_pvc.strip() or "flinktune-var"
        var_dir = worker_var_dir(env)
    except SettingsError as exc:
        raise SparkApplicationError(str(exc)) from None
    image = spark.image.strip()
    if not image:
        raise SparkApplicationError(
            "FLINKTUNE_SPARK_SUBMIT=kubernetes needs FLINKTUNE_SPARK_IMAGE (the image of docker/Dockerfile.spark-job)"
        )
    conf = spark.properties()
    try:
        instances = int(conf.pop("spark.executor.instances", "2"))
    except ValueError:
        raise SparkApplicationError(f"FLINKTUNE_SPARK_CONF: spark.executor.instances must be an integer, got {conf}") from None
    # The operator's spark-submit makes a driver Service owned by the driver pod (garbage-collected
    # with it): the driver need not delete it, so its Role grants no Service rights.
    conf.setdefault("spark.kubernetes.driver.service.deleteOnTermination", "false")
    mount = str(var_dir) if var_dir is not None else _DEFAULT_VAR_DIR
    values = {**passed_env(env), "FLINKTUNE_VAR_DIR": mount, "FLINKTUNE_SPARK_MASTER": IN_CLUSTER_MASTER}
    values.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
    pod_env = [{"name": k, "value": v} for k, v in sorted(values.items())]
    arguments = ["--job", job]
    if start_ms is not None:
        arguments += ["--start-ms", str(int(start_ms))]
    if end_ms is not None:
        arguments += ["--end-ms", str(int(end_ms))]
    labels = {"app.kubernetes.io/name": "flinktune-etl", "app.kubernetes.io/managed-by": "flinktune", "flinktune/job": job}

    def pod(service_account: str) -> dict[str, Any]:
        return {
            "serviceAccount": service_account,
            "labels": dict(labels),
            "env": [dict(e) for e in pod_env],
            "volumeMounts": [{"name": "var", "mountPath": mount}],
            "podSecurityContext": {
                "runAsNonRoot": True,
                "runAsUser": _SPARK_UID,
                "fsGroup": _SPARK_UID,
                "seccompProfile": {"type": "RuntimeDefault"},
            },
            "securityContext": {**_RESTRICTED_CONTAINER, "runAsUser": _SPARK_UID},
        }

    return {
        "apiVersion": API_VERSION,
        "kind": "SparkApplication",
        "metadata": {"namespace": k8s.home_namespace, "labels": dict(labels)},
        "spec": {
            "type": "Python",
            "pythonVersion": "3",
            "mode": "cluster",
            "image": image,
            "imagePullPolicy": "IfNotPresent",
            "mainApplicationFile": IMAGE_APP,
            "arguments": arguments,
            "sparkVersion": SPARK_IMAGE_VERSION,
            "sparkConf": conf,
            "restartPolicy": {"type": "Never"},  # Airflow retries the task, with back-off
            "volumes": [{"name": "var", "persistentVolumeClaim": {"claimName": var_pvc}}],
            "driver": {**pod(spark.driver_service_account), "cores": 1, "memory": "2g"},
            "executor": {**pod(spark.service_account), "instances": instances, "cores": 1, "memory": "2g"},
        },
    }
