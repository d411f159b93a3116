"""The log of validated batches: one JSON line per batch, passed or quarantined, with why and where.

Use :func:`record_batch` after a batch is validated (``validate`` does when given a GX project)
and :func:`read_batches` where a person is shown what was checked (the run report's data-quality
section). The log lives beside the GX project (``<project>/batches.jsonl``); each record is one
``write`` of one line to a file opened for appending, so concurrent writers never interleave
within a record. Paths inside the lake are kept relative to the log and resolved when read, so a
copied or moved state folder points at its own Data Docs and quarantine.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from data_contracts.outcome import ValidationOutcome

__all__ = ["LOG_NAME", "BatchRecord", "read_batches", "record_batch"]

LOG_NAME = "batches.jsonl"


@dataclass(frozen=True)
class BatchRecord:
    """One validated batch: which, when (epoch s), how many rows, whether it passed, the broken
    error rules (one sentence each), warnings, where it was quarantined and its Data Docs page."""

    dataset: str
    batch_id: str
    validated_at: float
    rows: int | None
    passed: bool
    errors: tuple[str, ...] = ()
    warnings: tuple[str, ...] = ()
    quarantine_path: str | None = None
    data_docs_page: str | None = None
    labels: Mapping[str, str] = field(default_factory=dict)

    @property
    def quarantined(self) -> bool:
        return self.quarantine_path is not None


def record_batch(
    root: str | Path, outcome: ValidationOutcome, *, labels: Mapping[str, str] | None = None, now: float | None = None
) -> BatchRecord:
    """Append ``outcome`` to ``<root>/batches.jsonl``; ``labels`` (e.g. ``{"job": "demo"}``) let readers filter."""
    record = BatchRecord(
        dataset=outcome.dataset,
        batch_id=outcome.batch_id,
        validated_at=time.time() if now is None else float(now),
        rows=outcome.rows,
        passed=outcome.passed,
        errors=tuple(f.describe() for f in outcome.errors),
        warnings=tuple(f.describe() for f in outcome.warnings),
        quarantine_path=str(outcome.quarantine_path) if outcome.quarantine_path else None,
        data_docs_page=str(outcome.data_docs_page) if outcome.data_docs_page else None,
        labels=dict(labels or {}),
    )
    stored = {
        **asdict(record),
        "quarantine_path": _relative(root, record.quarantine_path),
        "data_docs_page": _relative(root, record.data_docs_page),
    }
    path = Path(root) / LOG_NAME
    path.parent.mkdir(parents=True, exist_ok=True)
    line = (json.dumps(stored, default=str) + "\n").encode()
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line)
    finally:
        os.close(fd)
    return record


def _relative(root: str | Path, path: str | None) -> str | None:
    """``path`` relative to ``root`` when both are in the same lake (``root``'s parent), else as it is."""
    if path is None:
        return None
    lake = Path(root).resolve().parent
    full = Path(path).resolve()
    return os.path.relpath(full, Path(root).resolve()) if full.is_relative_to(lake) else str(path)


def _absolute(root: str | Path, path: str | None) -> str | None:
    return None if path is None or Path(path).is_absolute() else os.path.normpath(Path(root).resolve() / path)


def read_batches(root: str | Path, **labels: str) -> list[BatchRecord]:
    """The records under ``root`` (oldest first) whose labels include all of ``labels``; [] without a log.

    A line that does not parse (a writer killed mid-line) is skipped rather than hiding the rest.
    """
    path = Path(root) / LOG_NAME
    if not path.is_file():
        return []
    out = []
    for line in path.read_text().splitlines():
        try:
            d: dict[str, Any] = json.loads(line)
            d["quarantine_path"] = _absolute(root, d.get("quarantine_path")) or d.get("quarantine_path")
            d["data_docs_page"] = _absolute(root, d.get("data_docs_page")) or d.get("data_docs_page")
            rec = BatchRecord(**{**d, "errors": tuple(d.get("errors") or ()), "warnings": tuple(d.get("warnings") or ())})
        except (ValueError, TypeError):
            continue
        if all(rec.labels.get(k) == v for k, v in labels.items()):
            out.append(rec)
    return out
