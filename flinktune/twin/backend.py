"""The twin as a cluster: its samples, its realizer, its clock."""

from __future__ import annotations

from flinktune.clock import ManualClock
from flinktune.decision.backend import Backend
from flinktune.decision.stages import MetricsSource, Profiler
from flinktune.twin.adapters import TwinMetricsSource, TwinRealizer
from flinktune.twin.simulator import TwinJob

__all__ = ["twin_backend"]


def twin_backend(
    twin: TwinJob,
    clock: ManualClock,
    *,
    job: str | None = None,
    source: MetricsSource | None = None,
    profiler: Profiler | None = None,
) -> Backend:
    """The twin ``twin`` (answering to ``job``, default its own name) on ``clock``, which the caller
    moves with the twin. ``source`` defaults to the twin's own retained samples (the replay); the
    decide job passes the raw lake the twin writes to, as production reads what the extractor wrote."""
    return Backend(
        "twin",
        source if source is not None else TwinMetricsSource(twin, job=job),
        TwinRealizer(twin, job=job),
        clock,
        profiler=profiler,
        rescales_in_place=twin.profile.adaptive_scheduler,
    )
