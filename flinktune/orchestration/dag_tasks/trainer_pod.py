"""The trainer pod's spec: training in a Kubernetes pod on a GPU node, the production form of the training tasks.

Use :func:`TrainerPodConfig.from_env` then :func:`trainer_pod` to build the ``V1Pod`` for one job
entry point (``jobs.train_surrogate`` / ``jobs.train_forecaster``). ``KubernetesPodOperator`` runs
it (:func:`flinktune.orchestration.dag_tasks.k8s_operators.trainer_pod_task`): create, wait, stream
the log into the task log, delete. Variables (all optional except the image):

- ``FLINKTUNE_TRAINER_IMAGE``: image built from ``docker/Dockerfile.trainer`` (required).
- ``FLINKTUNE_K8S_HOME_NAMESPACE`` (``flinktune``: where the volume claim and Secrets are; not the Flink jobs' namespace), ``FLINKTUNE_TRAINER_SERVICE_ACCOUNT`` (``flinktune-trainer``).
- ``FLINKTUNE_TRAINER_GPUS`` (``1``; ``0`` trains on CPU), ``FLINKTUNE_TRAINER_CPU`` (``2``),
  ``FLINKTUNE_TRAINER_MEMORY`` (``8Gi``).
- ``FLINKTUNE_TRAINER_NODE_SELECTOR``: JSON object (default ``{"nvidia.com/gpu.present": "true"}``).
- ``FLINKTUNE_TRAINER_TOLERATIONS``: JSON list of tolerations (default: tolerate ``nvidia.com/gpu``).
- ``FLINKTUNE_TRAINER_SECRET``: a Secret whose keys become the pod's environment (``envFrom``:
  object-store credentials, and any credential below not named in the next variable).
- ``FLINKTUNE_TRAINER_SECRET_REFS``: JSON object ``{"VARIABLE": "secret-name:key"}``, each given to
  the pod as a ``secretKeyRef``, e.g. ``{"FLINKTUNE_MLFLOW_TRACKING_URI": "flinktune-db:mlflow-url"}``.
- ``FLINKTUNE_TRAINER_VAR_PVC`` (``flinktune-var``): the PersistentVolumeClaim holding the state
  folder (lake, reports); mounted at the worker's ``FLINKTUNE_VAR_DIR`` (``/var/flinktune``).

The pod gets every ``FLINKTUNE_*`` variable of the worker except the back-end switches and the
credentials, so it reads the same lake and MLflow. Credentials (the MLflow tracking URI, which
holds the database password, and any variable named like a password, token, secret or key) are
never copied into the pod spec: they reach the pod only as references, and a credential the
worker has with no reference for the pod is refused (:class:`TrainerPodError`) rather than dropped,
since a trainer without its MLflow URI would register its models in a private SQLite file.
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from flinktune.settings import KubernetesSettings, SettingsError, TrainerSettings, read_group, worker_var_dir

__all__ = ["CONTAINER", "TRAINING_MODULES", "TrainerPodConfig", "TrainerPodError", "is_credential", "passed_env", "trainer_pod"]

CONTAINER = "trainer"
"""The trainer container's name: the operator waits for it and streams its log."""
TRAINING_MODULES = {"surrogate": "jobs.train_surrogate", "forecaster": "jobs.train_forecaster"}
_NOT_PASSED = {"FLINKTUNE_CLUSTER", "FLINKTUNE_TRAINING", "FLINKTUNE_SPARK_SUBMIT"}
_DEFAULT_TOLERATIONS = ({"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"},)
_CREDENTIALS = {"FLINKTUNE_MLFLOW_TRACKING_URI"}  # a database URL with its password in production
_CREDENTIAL_NAME = re.compile(r"PASSWORD|TOKEN|SECRET|CREDENTIAL|_KEY($|_)")
_DEFAULT_VAR_DIR = "/var/flinktune"


def is_credential(name: str) -> bool:
    """Whether the variable ``name`` may hold a credential, so that it never goes into a spec as a value."""
    return name in _CREDENTIALS or bool(_CREDENTIAL_NAME.search(name.removeprefix("FLINKTUNE_TRAINER_")))


def passed_env(env: Mapping[str, str]) -> dict[str, str]:
    """The worker's ``FLINKTUNE_*`` variables a pod it starts gets as values: not the back-end switches, no credential."""
    return {k: v for k, v in env.items() if k.startswith("FLINKTUNE_") and k not in _NOT_PASSED and not is_credential(k)}


class TrainerPodError(RuntimeError):
    """The trainer pod is misconfigured; the message names the variable."""


@dataclass(frozen=True)
class TrainerPodConfig:
    """Where and with what the trainer pod runs; see the module docstring for the variables."""

    image: str
    namespace: str = "flinktune"
    service_account: str = "flinktune-trainer"
    gpus: int = 1
    cpu: str = "2"
    memory: str = "8Gi"
    node_selector: Mapping[str, str] = field(default_factory=lambda: {"nvidia.com/gpu.present": "true"})
    tolerations: tuple[Mapping[str, Any], ...] = _DEFAULT_TOLERATIONS
    secret: str | None = None
    env: Mapping[str, str] = field(default_factory=dict)
    secret_refs: Mapping[str, tuple[str, str]] = field(default_factory=dict)
    var_pvc: str = "flinktune-var"
    var_dir: str = _DEFAULT_VAR_DIR

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> TrainerPodConfig:
        env = os.environ if environ is None else environ
        try:
            t = read_group(TrainerSettings, env)
            k8s = read_group(KubernetesSettings, env)
            var_dir = worker_var_dir(env)
        except SettingsError as exc:
            raise TrainerPodError(str(exc)) from None
        if not t.image.strip():
            raise TrainerPodError(
                "FLINKTUNE_TRAINING=kubernetes needs FLINKTUNE_TRAINER_IMAGE (the image of docker/Dockerfile.trainer)"
            )
        return cls(
            image=t.image.strip(),
            namespace=k8s.home_namespace,
            service_account=t.service_account,
            gpus=t.gpus,
            cpu=t.cpu,
            memory=t.memory,
            node_selector=t.node_selector,
            tolerations=tuple(t.tolerations),
            secret=t.secret.strip() or None,
            # The worker's variables are passed through to the pod, not read here.
            env=passed_env(env),
            secret_refs=_secret_refs(t, env),
            var_pvc=t.var_pvc.strip() or "flinktune-var",
            var_dir=str(var_dir) if var_dir is not None else _DEFAULT_VAR_DIR,
        )


def _secret_refs(t: TrainerSettings, env: Mapping[str, str]) -> dict[str, tuple[str, str]]:
    """``FLINKTUNE_TRAINER_SECRET_REFS`` checked; every credential the worker holds must be covered."""
    refs: dict[str, tuple[str, str]] = {}
    for name, ref in t.secret_refs.items():
        secret, _, key = str(ref).partition(":")
        if not secret or not key:
            raise TrainerPodError(f"FLINKTUNE_TRAINER_SECRET_REFS[{name!r}]={ref!r}: expected 'secret-name:key'")
        refs[str(name)] = (secret, key)
    uncovered = sorted(
        k
        for k in env
        if k.startswith("FLINKTUNE_")
        and k not in _NOT_PASSED
        and is_credential(k)
        and k not in refs
        and not k.startswith("FLINKTUNE_TRAINER_")
    )
    if uncovered and not t.secret.strip():
        raise TrainerPodError(
            f"{', '.join(uncovered)}: a credential is never copied into the trainer pod's spec; give it as a reference in "
            f'FLINKTUNE_TRAINER_SECRET_REFS (e.g. \'{{"{uncovered[0]}": "flinktune-db:mlflow-url"}}\') or in the '
            "Secret named by FLINKTUNE_TRAINER_SECRET"
        )
    return refs


def _pod_name(model: str, job: str, run_key: str) -> str:
    suffix = hashlib.sha1(run_key.encode()).hexdigest()[:8]
    return f"flinktune-train-{model}-{job}"[: 63 - 9] + f"-{suffix}"


def trainer_pod(model: str, job: str, config: TrainerPodConfig, *, run_key: str = "") -> Any:
    """A ``kubernetes.client.V1Pod`` that runs ``python -m jobs.train_<model> --job <job>`` once.

    ``model`` is ``surrogate`` or ``forecaster``; ``run_key`` (e.g. the Airflow run id) makes the
    pod name unique per run. GPUs go in the limits (Kubernetes requires extended resources there).
    """
    from kubernetes import client

    if model not in TRAINING_MODULES:
        raise TrainerPodError(f"unknown model {model!r}; known: {', '.join(TRAINING_MODULES)}")
    limits: dict[str, str] = {"cpu": config.cpu, "memory": config.memory}
    env = dict(config.env)
    if config.gpus:
        limits["nvidia.com/gpu"] = str(config.gpus)
    env["FLINKTUNE_DEVICE"] = "cuda" if config.gpus else "cpu"
    env["FLINKTUNE_VAR_DIR"] = config.var_dir  # the lake's volume is mounted there
    env.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
    env_vars = [client.V1EnvVar(name=k, value=v) for k, v in sorted(env.items()) if k not in config.secret_refs]
    env_vars += [
        client.V1EnvVar(name=k, value_from=client.V1EnvVarSource(secret_key_ref=client.V1SecretKeySelector(name=s, key=key)))
        for k, (s, key) in sorted(config.secret_refs.items())
    ]
    container = client.V1Container(
        name=CONTAINER,
        image=config.image,
        command=["python", "-m", TRAINING_MODULES[model], "--job", job],
        env=env_vars,
        env_from=[client.V1EnvFromSource(secret_ref=client.V1SecretEnvSource(name=config.secret))] if config.secret else None,
        resources=client.V1ResourceRequirements(requests={"cpu": config.cpu, "memory": config.memory}, limits=limits),
        volume_mounts=[client.V1VolumeMount(name="var", mount_path=config.var_dir)],
        security_context=client.V1SecurityContext(
            run_as_non_root=True,
            allow_privilege_escalation=False,
            capabilities=client.V1Capabilities(drop=["ALL"]),
            seccomp_profile=client.V1SeccompProfile(type="RuntimeDefault"),
        ),
    )
    labels = {
        "app.kubernetes.io/name": "flinktune-trainer",
        "app.kubernetes.io/managed-by": "flinktune",
        "flinktune/job": job,
        "flinktune/model": model,
    }
    return client.V1Pod(
        api_version="v1",
        kind="Pod",
        metadata=client.V1ObjectMeta(name=_pod_name(model, job, run_key or job), namespace=config.namespace, labels=labels),
        spec=client.V1PodSpec(
            restart_policy="Never",
            service_account_name=config.service_account,
            automount_service_account_token=False,  # the trainer calls no Kubernetes API: no token to steal
            node_selector=dict(config.node_selector) or None,
            tolerations=[client.V1Toleration(**_snake(t)) for t in config.tolerations] or None,
            containers=[container],
            volumes=[
                client.V1Volume(
                    name="var", persistent_volume_claim=client.V1PersistentVolumeClaimVolumeSource(claim_name=config.var_pvc)
                )
            ],
            active_deadline_seconds=3 * 3600,
        ),
    )


def _snake(toleration: Mapping[str, Any]) -> dict[str, Any]:
    names = {
        "key": "key",
        "operator": "operator",
        "value": "value",
        "effect": "effect",
        "tolerationSeconds": "toleration_seconds",
    }
    unknown = sorted(set(toleration) - set(names))
    if unknown:
        raise TrainerPodError(f"FLINKTUNE_TRAINER_TOLERATIONS: unknown toleration field(s) {unknown}; allowed: {sorted(names)}")
    return {names[k]: v for k, v in toleration.items()}
