"""The cncf.kubernetes provider's operators for the stages that run on Kubernetes.

Use from DAG files, and only when the back end asks for it (importing this module imports the
provider, which the embedded setup never needs):

- :func:`trainer_pod_task` (``FLINKTUNE_TRAINING=kubernetes``): a ``KubernetesPodOperator`` running
  the trainer pod :func:`~flinktune.orchestration.dag_tasks.trainer_pod.trainer_pod` builds, on a
  GPU node; the pod's log streams into the task log, the pod is deleted at the end.
- :func:`etl_spark_task` (``FLINKTUNE_SPARK_SUBMIT=kubernetes``): a ``SparkKubernetesOperator``
  submitting the SparkApplication of
  :func:`~flinktune.orchestration.dag_tasks.spark_application.spark_application` and following its driver.

Both read the settings when the task runs (as the in-process tasks do), check the run's params
first (:func:`~flinktune.orchestration.dag_tasks.dag_wiring.task_params`: a bad trigger fails
before anything is created), act on the run's job (an asset-triggered run's job comes from the
event), and write that job into the asset events they emit. They talk to the API server as the
worker's service account (in-cluster configuration; the calls are in docker/k8s/rbac.yaml). Neither
pushes an XCom: the trainer's summary is the last line of its log, and the Spark driver's stays in
the driver.
"""

from __future__ import annotations

from typing import Any

from airflow.providers.cncf.kubernetes.operators.pod import KubernetesPodOperator
from airflow.providers.cncf.kubernetes.operators.spark_kubernetes import SparkKubernetesOperator

from flinktune.orchestration.dag_tasks.dag_wiring import CHAMPIONS, FEATURES_1M, FEATURES_10S, mark_outlets, task_params
from flinktune.orchestration.dag_tasks.spark_application import spark_application
from flinktune.orchestration.dag_tasks.trainer_pod import (
    CONTAINER,
    TRAINING_MODULES,
    TrainerPodConfig,
    TrainerPodError,
    trainer_pod,
)

__all__ = ["EtlSparkOperator", "TrainerPodOperator", "etl_spark_task", "trainer_pod_task"]

#: The provider's settings flinktune relies on, the same for both operators: the worker's service
#: account (no kubeconfig, no Airflow connection), the log streamed, no XCom sidecar (it would need
#: pods/exec and an image of its own), reattach to the pod of a restarted worker.
_COMMON: dict[str, Any] = {"in_cluster": True, "get_logs": True, "do_xcom_push": False, "reattach_on_restart": True}


class TrainerPodOperator(KubernetesPodOperator):
    """``KubernetesPodOperator`` whose pod is the trainer pod of one job (built when the task runs).

    Mapped over the ``fleet`` task's targets (``{"job": ...}``, one pod per fleet job), as the
    in-process training tasks are; without a target it trains the run's job. ``job`` is set by
    :meth:`execute`; set it by hand only to render the pod outside a run
    (``build_pod_request_obj(context, dry_run=True)``).
    """

    def __init__(self, *, model: str, target: dict[str, Any] | None = None, **kwargs: Any) -> None:
        if model not in TRAINING_MODULES:
            raise TrainerPodError(f"unknown model {model!r}; known: {', '.join(TRAINING_MODULES)}")
        super().__init__(base_container_name=CONTAINER, on_finish_action="delete_pod", **_COMMON, **kwargs)
        self.model = model
        self.target: dict[str, Any] = dict(target or {})
        self.job: str | None = None

    def execute(self, context: Any) -> Any:
        params = task_params(context["params"])  # first: a bad trigger fails before anything acts
        self.job = str(self.target.get("job") or params["job"])
        result = super().execute(context)
        mark_outlets(self.job, CHAMPIONS)
        return result

    def build_pod_request_obj(self, context: Any = None, *, dry_run: bool = False) -> Any:
        if self.job is None:
            raise TrainerPodError(f"task {self.task_id}: the trainer pod is built for a job; none is set (execute sets it)")
        config = TrainerPodConfig.from_env()  # the worker's settings, read when the task runs
        # The operator's own fields win over the pod spec when set: leave them empty, except the
        # namespace (it decides where the operator looks for a pod to reattach to).
        self.namespace = config.namespace
        run_key = str(context["run_id"]) if context else ""
        self.full_pod_spec = trainer_pod(self.model, self.job, config, run_key=run_key)
        return super().build_pod_request_obj(context, dry_run=dry_run)


def trainer_pod_task(model: str, targets: Any = None, **kwargs: Any) -> Any:
    """The ``train_<model>`` task as trainer pods; ``kwargs`` are task arguments (timeout, retries, trigger rule).

    ``targets``: the ``fleet`` task's output (one pod per job, as the in-process task maps) or
    ``None`` for one pod for the run's job.
    """
    common = {"task_id": f"train_{model}", "model": model, "outlets": [CHAMPIONS], **kwargs}
    if targets is None:
        return TrainerPodOperator(**common)
    return TrainerPodOperator.partial(**common).expand(target=targets)


class EtlSparkOperator(SparkKubernetesOperator):
    """``SparkKubernetesOperator`` whose SparkApplication runs the ETL for one job of the run.

    Mapped over the ``collect`` task's windows (``{"job": ..., "start_ms": ..., "end_ms": ...}``,
    one per fleet job), as the in-process ``etl_features`` is; without a window it curates the
    run's job over the run's ``start_ms``/``end_ms`` params. ``job`` and ``window`` are set by
    :meth:`execute`; set them by hand only to look at the application (:attr:`template_body`)
    outside a run.
    """

    def __init__(self, *, window: dict[str, Any] | None = None, **kwargs: Any) -> None:
        super().__init__(delete_on_termination=True, **_COMMON, **kwargs)
        self.job: str | None = None
        self.window: dict[str, Any] = dict(window or {})

    @property
    def template_body(self) -> dict[str, Any]:
        if self.job is None:
            raise ValueError(f"task {self.task_id}: the SparkApplication is built for a job; none is set (execute sets it)")
        app = spark_application(self.job, start_ms=self.window.get("start_ms"), end_ms=self.window.get("end_ms"))
        return {"spark": app}

    def execute(self, context: Any) -> Any:
        params = task_params(context["params"])  # first: a bad trigger fails before anything acts
        if not self.window:
            self.window = {"job": params["job"], "start_ms": params.get("start_ms"), "end_ms": params.get("end_ms")}
        self.job = str(self.window.get("job") or params["job"])
        body = self.template_body["spark"]
        # The application lives beside the lake's claim; named per job, the operator adds a suffix per run.
        self.namespace = body["metadata"]["namespace"]
        self.name = f"flinktune-etl-{self.job}"
        result = super().execute(context)
        mark_outlets(self.job, FEATURES_10S, FEATURES_1M)
        return result


def etl_spark_task(windows: Any = None, **kwargs: Any) -> Any:
    """The ``etl_features`` task as SparkApplications; ``kwargs`` are task arguments (timeout, trigger rule).

    ``windows``: the ``collect`` task's mapped output (one application per job, as the in-process
    task maps) or ``None`` for one application for the run's job.
    """
    common = {"task_id": "etl_features", "outlets": [FEATURES_10S, FEATURES_1M], **kwargs}
    if windows is None:
        return EtlSparkOperator(**common)
    return EtlSparkOperator.partial(**common).expand(window=windows)
