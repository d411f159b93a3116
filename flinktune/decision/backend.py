"""One cluster's stages for the decision loop: where samples come from, what applies a configuration,
whose clock it runs on, where profiling runs, and whether the cluster rescales in place.

Use :class:`Backend` to hand :func:`flinktune.decision.loop.build_decision_loop` a cluster; the
factories that build one per kind live with their clusters (:mod:`flinktune.twin.backend`,
:mod:`flinktune.backends.kubernetes`, :mod:`flinktune.backends.local_flink`).
"""

from __future__ import annotations

from dataclasses import dataclass

from flinktune.clock import Clock
from flinktune.config_space import Configuration
from flinktune.decision.reconfig import ReconfigMode, same_shape
from flinktune.decision.stages import MetricsSource, Profiler, Realizer

__all__ = ["CLUSTER_KINDS", "Backend"]

#: The cluster kinds flinktune runs on.
CLUSTER_KINDS: tuple[str, ...] = ("twin", "kubernetes", "local-flink")


@dataclass(frozen=True)
class Backend:
    """The cluster behind one decision loop.

    ``name`` is the cluster kind (:data:`CLUSTER_KINDS`, or a test's own name); ``profiler`` is None
    where profiling runs elsewhere (on Kubernetes the profiling DAG runs them, so a profile decision
    is only recorded); ``rescales_in_place`` says whether the cluster can change parallelism without
    a redeploy at all (Flink >= 1.18 with the adaptive scheduler; the twin's profile).
    """

    name: str
    source: MetricsSource
    realizer: Realizer
    clock: Clock
    profiler: Profiler | None = None
    rescales_in_place: bool = True

    def mode_for(self, current: Configuration, target: Configuration) -> ReconfigMode:
        """How this cluster carries out ``current`` -> ``target``: the one in-place rule
        (:func:`~flinktune.decision.reconfig.same_shape`) where the cluster rescales in place."""
        if current == target:
            return ReconfigMode.NOOP
        return ReconfigMode.IN_PLACE if self.rescales_in_place and same_shape(current, target) else ReconfigMode.REDEPLOY
