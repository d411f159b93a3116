"""A local standalone Flink cluster as a cluster: REST metrics, the REST realizer, the wall clock."""

from __future__ import annotations

from flinktune.clock import SystemClock
from flinktune.decision.backend import Backend
from flinktune.decision.stages import MetricsSource, Profiler
from flinktune.localflink.realizer import LocalFlinkRealizer

__all__ = ["local_flink_backend"]


def local_flink_backend(realizer: LocalFlinkRealizer, source: MetricsSource, profiler: Profiler | None = None) -> Backend:
    """The local cluster ``realizer`` drives, read through ``source`` (its REST poller, or a view of it
    without the profiling periods), profiling with ``profiler`` (ramps to saturation). Flink's
    adaptive scheduler rescales in place there (the realizer's in-place path)."""
    return Backend("local-flink", source, realizer, SystemClock(), profiler=profiler)
