"""What each cluster kind (the twin, Kubernetes, a local Flink) gives the decision loop.

Use :class:`Backend` to hand :func:`flinktune.decision.loop.build_decision_loop` one cluster's
stages: where the metrics come from, what applies a configuration, whose clock the loop runs on,
and (where the cluster runs them) the profiling runs.
"""

from flinktune.backends.backend import Backend

__all__ = ["Backend"]
