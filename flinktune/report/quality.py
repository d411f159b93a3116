"""The report's data-quality section: which batches of the job were validated, which quarantined, why.

Use :func:`data_quality_from_lake` to collect a job's batches from the lake's batch log (written
by :func:`data_contracts.validate` through the lake's GX project) and :func:`data_quality_content`
for what both templates render: counts, one row per batch with its broken rules, and links to
its GX Data Docs page and quarantine folder. Links are ``file://`` URLs: the report and the lake
sit on the same disk, in different folders.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from data_contracts import BatchRecord, read_batches
from flinktune.lake import Lake

__all__ = ["DataQuality", "data_quality_content", "data_quality_from_lake"]

#: Broken rules shown per batch (the quarantine report lists all of them).
_REASONS_SHOWN = 3


@dataclass(frozen=True)
class DataQuality:
    """A job's validated batches (oldest first) and the GX Data Docs front page (None before any)."""

    batches: tuple[BatchRecord, ...]
    data_docs_index: Path | None = None


def data_quality_from_lake(lake: Lake, job: str) -> DataQuality:
    """The batches of ``job`` in the lake's batch log, and its Data Docs site if built."""
    index = lake.data_docs_index
    return DataQuality(tuple(read_batches(lake.quality_root, job=job)), index if index.is_file() else None)


def _uri(path: str | Path | None) -> str | None:
    return Path(path).resolve().as_uri() if path else None


def _status(b: BatchRecord) -> str:
    if b.quarantined:
        return "quarantined"
    if not b.passed:
        return "failed"
    return f"passed, {len(b.warnings)} warning{'s' if len(b.warnings) != 1 else ''}" if b.warnings else "passed"


def data_quality_content(dq: DataQuality | None) -> dict[str, Any] | None:
    """Counts and one row per batch for the templates; None when the report was given no batch log."""
    if dq is None:
        return None
    rows = []
    for b in dq.batches:
        reasons = list(b.errors[:_REASONS_SHOWN])
        if len(b.errors) > _REASONS_SHOWN:
            reasons.append(f"and {len(b.errors) - _REASONS_SHOWN} more broken rules (see the quarantine report)")
        rows.append(
            {
                "time": pd.Timestamp(b.validated_at, unit="s", tz="UTC").strftime("%Y-%m-%d %H:%M:%S"),
                "dataset": b.dataset,
                "batch_id": b.batch_id,
                "rows": "unknown" if b.rows is None else f"{b.rows:,}",
                "status": _status(b),
                "why": reasons,
                "data_docs": _uri(b.data_docs_page),
                "quarantine": _uri(b.quarantine_path),
            }
        )
    quarantined = sum(1 for b in dq.batches if b.quarantined)
    return {
        "validated": len(dq.batches),
        "passed": sum(1 for b in dq.batches if b.passed),
        "quarantined": quarantined,
        "with_warnings": sum(1 for b in dq.batches if b.passed and b.warnings),
        "data_docs_index": _uri(dq.data_docs_index),
        "batches": rows,
    }
