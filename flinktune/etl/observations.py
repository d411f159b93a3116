"""Contract check for profiling observations, the gate ``jobs.profile`` calls before writing them.

Use :func:`validate_observations` on the frame of profiling runs (``PROFILING_COLUMNS``) before it
is written to ``curated/profiling_observations``; a failing batch lands in
``<lake>/quarantine/profiling_observations/<batch_id>/`` and :class:`ContractViolation` is raised.
Every batch runs as a GX Checkpoint of the lake's GX project (:func:`quality_root`), which
publishes Data Docs and logs the batch for the run report.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from data_contracts import ValidationOutcome, validate
from flinktune.clock import Clock
from flinktune.lake import Lake
from flinktune.settings import Settings

__all__ = ["quality_root", "quarantine_root", "validate_observations"]


def quarantine_root(settings: Settings) -> Path:
    """The folder whose ``<dataset>/<batch_id>`` children hold quarantined batches."""
    return Lake(settings.lake_dir).quarantine_root  # type: ignore[arg-type]  # lake_dir is filled by Settings' validator


def quality_root(settings: Settings) -> Path:
    """The lake's GX project folder: the contracts' Checkpoints, Data Docs and the batch log."""
    return Lake(settings.lake_dir).quality_root  # type: ignore[arg-type]


def validate_observations(
    df: Any, settings: Settings, batch_id: str, *, clock: Clock | None = None, job: str | None = None
) -> ValidationOutcome:
    """Validate profiling observations (pandas or Spark) against ``profiling_observations``.

    Freshness is checked only when a ``clock`` is given (simulated runs have simulated time).
    ``job`` labels the batch in the log the run report reads.
    """
    now = clock.now() if clock is not None else None
    return validate(
        df,
        "profiling_observations",
        batch_id=batch_id,
        quarantine_root=quarantine_root(settings),
        now=now,
        gx_project=quality_root(settings) if settings.data_docs else None,
        labels={"job": job} if job else None,
    )
