"""Twin or Kubernetes: the realizer the decision task applies configurations with.

Use :func:`make_realizer` in ``jobs.decide`` in place of a hard-wired ``TwinRealizer``: with
``FLINKTUNE_CLUSTER=twin`` (default) it returns ``TwinRealizer(twin, job=job)``; with
``FLINKTUNE_CLUSTER=kubernetes`` it returns a :class:`flinktune.kubernetes.KubernetesRealizer` on
the FlinkDeployment ``<job>`` in ``FLINKTUNE_K8S_NAMESPACE`` (required; one of the namespaces the
Role in ``docker/k8s/rbac.yaml`` names), with ``FLINKTUNE_VERTEX_IDS`` (JSON object, vertex name ->
Flink job vertex id; optional) for per-vertex parallelism. Credentials come from the pod's service
account (in-cluster) or, outside a cluster, from ``KUBECONFIG``; never from flinktune's settings.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from flinktune.backends.choice import BackendError, load_backends
from flinktune.settings import KubernetesSettings, SettingsError, read_group

__all__ = ["kubernetes_api", "kubernetes_settings", "make_realizer"]


def kubernetes_api(environ: Mapping[str, str] | None = None, *, retries: int | None = None) -> Any:
    """A ``CustomObjectsApi``: in-cluster config inside a pod, else ``KUBECONFIG`` / ``~/.kube/config``;
    its requests retried ``retries`` times (default: ``FLINKTUNE_TIMEOUT_KUBERNETES_RETRIES``) by the
    client's own urllib3 retry (:mod:`flinktune.kubernetes.calls`)."""
    from kubernetes import client, config

    from flinktune.kubernetes.calls import bounded_api
    from flinktune.settings import TimeoutSettings

    env = os.environ if environ is None else environ
    try:
        if env.get("KUBERNETES_SERVICE_HOST"):
            config.load_incluster_config()
        else:
            config.load_kube_config(config_file=env.get("KUBECONFIG"))
    except (config.ConfigException, OSError, TypeError, ValueError) as exc:
        # The client's messages run over several lines; the first says what is missing.
        where = (
            "in-cluster service account"
            if env.get("KUBERNETES_SERVICE_HOST")
            else f"kubeconfig {env.get('KUBECONFIG') or '~/.kube/config'}"
        )
        detail = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise BackendError(
            f"FLINKTUNE_CLUSTER=kubernetes: cannot load the {where} ({detail}); "
            "set KUBECONFIG to a readable kubeconfig or run inside the cluster"
        ) from None
    return bounded_api(
        client.Configuration.get_default_copy(), retries=TimeoutSettings().kubernetes_retries if retries is None else retries
    )


def kubernetes_settings(environ: Mapping[str, str] | None = None) -> KubernetesSettings:
    """The Kubernetes settings of a real cluster: the namespace is required (:class:`BackendError` otherwise)."""
    try:
        k8s = read_group(KubernetesSettings, environ)
    except SettingsError as exc:
        raise BackendError(str(exc)) from None
    if not k8s.namespace.strip():
        raise BackendError("FLINKTUNE_CLUSTER=kubernetes needs FLINKTUNE_K8S_NAMESPACE (the FlinkDeployment's namespace)")
    return k8s


def make_realizer(
    job: str,
    *,
    twin: Any = None,
    dry_run: bool = False,
    api: Any = None,
    environ: Mapping[str, str] | None = None,
    timeouts: Any = None,
    budget_s: float | None = None,
) -> Any:
    """The :class:`flinktune.decision.stages.Realizer` for ``job`` on the configured cluster.

    ``twin`` (a ``TwinJob``) is required on the twin; ``api`` overrides the Kubernetes client
    (tests); ``dry_run`` makes the Kubernetes realizer only compute diffs. ``timeouts``
    (:class:`flinktune.settings.TimeoutSettings`, default from the environment) bounds each API
    call; ``budget_s`` one apply (default ``timeouts.apply_budget_s``).
    """
    env = os.environ if environ is None else environ
    backends = load_backends(env)
    if backends.cluster == "twin":
        if twin is None:
            raise BackendError(f"FLINKTUNE_CLUSTER=twin: job {job!r} has no twin; run jobs.simulate first")
        from flinktune.twin.adapters import TwinRealizer

        return TwinRealizer(twin, job=job)
    k8s = kubernetes_settings(env)
    from flinktune.kubernetes import KubernetesRealizer
    from flinktune.settings import TimeoutSettings

    t = timeouts if timeouts is not None else TimeoutSettings()
    budget = t.apply_budget_s if budget_s is None else budget_s
    return KubernetesRealizer(
        api if api is not None else kubernetes_api(env, retries=t.kubernetes_retries),
        k8s.namespace,
        k8s.vertex_ids,
        dry_run=dry_run,
        request_timeout_s=t.kubernetes_request_s,
        budget_s=budget,
        stable_timeout_s=min(600.0, budget / 2),
    )
