"""Contract check and the single write of profiling observations (``jobs.profile`` on the twin, the
profiling DAG's deployments on Kubernetes).

Use :func:`write_observations` to put a frame of profiling runs (``PROFILING_COLUMNS``, one job) in
``curated/profiling_observations`` after :func:`validate_observations` passed it; a failing batch lands in
``<lake>/quarantine/profiling_observations/<batch_id>/`` and :class:`ContractViolation` is raised.
Every batch runs as a GX Checkpoint of the lake's GX project (:func:`quality_root`), which
publishes Data Docs and logs the batch for the run report.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import pandas as pd

from data_contracts import ValidationOutcome, validate
from flinktune.clock import Clock
from flinktune.lake import PROFILING_OBSERVATIONS, Lake
from flinktune.settings import Settings

__all__ = ["quality_root", "quarantine_root", "validate_observations", "write_observations"]


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


def write_observations(df: pd.DataFrame, settings: Settings) -> Path:
    """The single write of profiling observations, after their data contract passed.

    Writes ``df`` (one job) to ``<lake>/curated/profiling_observations/job=<job>/part-<runhash>.parquet``
    through a temporary name and a rename. The ``job`` column becomes the partition directory, as
    in the raw lake; ``runhash`` is derived from the run ids, so re-profiling the same runs rewrites
    the same file.
    """
    jobs = df["job"].unique().tolist()
    if len(jobs) != 1:
        raise ValueError(f"{PROFILING_OBSERVATIONS}: expected observations of exactly one job, got {jobs}")
    runhash = hashlib.sha1("|".join(sorted(df["run_id"].astype(str))).encode()).hexdigest()[:16]
    # Nothing unvalidated reaches the lake: a failing batch is quarantined and this raises.
    validate_observations(df, settings, batch_id=f"{jobs[0]}-{runhash}", job=str(jobs[0]))
    return Lake(settings.lake_dir).write_observations(df.drop(columns=["job"]), str(jobs[0]), f"part-{runhash}")  # type: ignore[arg-type]
