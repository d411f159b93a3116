"""One cluster's stages for the decision loop (see the package docstring)."""

from __future__ import annotations

from dataclasses import dataclass

from flinktune.clock import Clock
from flinktune.decision.stages import MetricsSource, Profiler, Realizer

__all__ = ["Backend"]


@dataclass(frozen=True)
class Backend:
    """The cluster behind one decision loop.

    ``name`` is the cluster kind (``twin``, ``kubernetes``, ``local-flink``); ``profiler`` is None
    where profiling runs elsewhere (on Kubernetes the profiling DAG runs them, so a profile
    decision is only recorded).
    """

    name: str
    source: MetricsSource
    realizer: Realizer
    clock: Clock
    profiler: Profiler | None = None
