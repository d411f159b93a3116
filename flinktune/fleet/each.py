"""Run one step (decide, train, ingest) for every job of a fleet, each job isolated from the others.

Use :func:`for_each_job` where one process serves many jobs (the CLI, the fleet benchmark, a
mapped Airflow task that batches jobs): a job that is held is skipped with its reason, a job whose
step raises is recorded as failed with a one-line error, and the next job runs regardless. A job
that vanished from the cluster between discovery and its step (an HTTP 404 from the API) is
recorded as held, not failed: nothing is wrong with flinktune, the job is gone.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from flinktune.fleet.registry import Fleet, JobSettings

__all__ = ["JobOutcome", "for_each_job"]

log = logging.getLogger(__name__)

Status = Literal["done", "held", "failed"]


@dataclass(frozen=True)
class JobOutcome:
    """What happened to one job: ``result`` of its step when done, else the reason in ``message``."""

    job: str
    status: Status
    message: str = ""
    result: Any = None
    seconds: float = 0.0


def _vanished(exc: BaseException) -> bool:
    """True for a Kubernetes 'not found' (the kubernetes client's ApiException carries ``status``)."""
    return getattr(exc, "status", None) == 404


def for_each_job(
    fleet: Fleet,
    step: Callable[[JobSettings], Any],
    *,
    clock: Callable[[], float] = time.monotonic,
) -> list[JobOutcome]:
    """``step(settings)`` for every managed job in ``fleet`` order; never raises for one job's error.

    Returns one :class:`JobOutcome` per fleet entry, held ones included, so a caller can report
    the whole fleet. KeyboardInterrupt and SystemExit still stop the loop.
    """
    outcomes = []
    for entry in fleet.entries:
        if entry.settings is None:
            outcomes.append(JobOutcome(entry.name, "held", entry.held or "held"))
            continue
        start = clock()
        try:
            result = step(entry.settings)
        except Exception as exc:  # one job's failure must not block the others
            took = clock() - start
            first = (str(exc).splitlines() or [""])[0]
            if _vanished(exc):
                outcomes.append(
                    JobOutcome(entry.name, "held", f"{entry.source} vanished from the cluster: {first}", seconds=took)
                )
                log.warning("fleet: job %s vanished before its step: %s", entry.name, first)
            else:
                outcomes.append(JobOutcome(entry.name, "failed", f"{type(exc).__name__}: {first}", seconds=took))
                log.exception("fleet: job %s failed; the other jobs go on", entry.name)
            continue
        outcomes.append(JobOutcome(entry.name, "done", result=result, seconds=clock() - start))
    return outcomes
