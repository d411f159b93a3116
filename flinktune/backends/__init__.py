"""What each cluster kind (the twin, Kubernetes, a local Flink) gives the decision loop.

Use :class:`Backend` to hand :func:`flinktune.decision.loop.build_decision_loop` one cluster's
stages: where the metrics come from, what applies a configuration, whose clock the loop runs on,
where profiling runs, and whether the cluster rescales in place (:meth:`Backend.mode_for`, the one
in-place rule of :mod:`flinktune.decision.reconfig`). One factory per kind:
:func:`~flinktune.twin.backend.twin_backend`, :func:`~flinktune.backends.kubernetes.kubernetes_backend`,
:func:`~flinktune.backends.local_flink.local_flink_backend` (import them from their modules: each
pulls in its cluster's client). Which kind a deployment uses comes from the environment
(:func:`flinktune.backends.choice.load_backends`: ``FLINKTUNE_CLUSTER``, ``FLINKTUNE_TRAINING``,
``FLINKTUNE_SPARK_SUBMIT``); :mod:`flinktune.backends.cluster` builds the configured realizer and the
Kubernetes client. Jobs and tasks import these from here, never from ``flinktune.orchestration``.
"""

from flinktune.decision.backend import CLUSTER_KINDS, Backend

__all__ = ["CLUSTER_KINDS", "Backend"]
