"""A FlinkDeployment on Kubernetes as a cluster: the raw lake's samples, the patching realizer, the wall clock."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from flinktune.clock import SystemClock
from flinktune.decision.backend import Backend
from flinktune.decision.stages import MetricsSource

__all__ = ["kubernetes_backend"]


def kubernetes_backend(
    job: str,
    source: MetricsSource,
    *,
    dry_run: bool = False,
    api: Any = None,
    environ: Mapping[str, str] | None = None,
    timeouts: Any = None,
    budget_s: float | None = None,
) -> Backend:
    """The FlinkDeployment ``job`` (with ``FLINKTUNE_CLUSTER=kubernetes``, the namespace and vertex ids
    from ``environ``: :func:`flinktune.backends.cluster.make_realizer`), read through ``source``
    (the raw lake the extractor keeps fresh). No profiler: the ``flinktune_profile`` DAG carries out profile decisions.
    In place only on Flink >= 1.18 (checked per patch by the realizer). ``timeouts`` and ``budget_s``
    bound every API call and one apply (see :func:`~flinktune.backends.cluster.make_realizer`)."""
    from flinktune.backends.cluster import make_realizer

    return Backend(
        "kubernetes",
        source,
        make_realizer(job, dry_run=dry_run, api=api, environ=environ, timeouts=timeouts, budget_s=budget_s),
        SystemClock(),
    )
