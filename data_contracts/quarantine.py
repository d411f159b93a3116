"""Write a failing batch and its report under ``<quarantine_root>/<dataset>/<batch_id>/``, atomically.

Use :func:`write_quarantine` (``validate`` does, on error-severity failures). The folder holds
``batch.parquet`` (pandas; a Spark batch is a parquet folder ``batch/``), ``report.json`` and
``report.md``. Everything is written into a hidden temporary sibling first and renamed into place,
so readers never see half a quarantine folder; a rerun of the same batch id replaces the old one.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import uuid
from pathlib import Path
from typing import Any

from data_contracts.outcome import ValidationOutcome
from data_contracts.precheck import engine_of

__all__ = ["check_batch_id", "render_markdown", "write_quarantine"]

_BATCH_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._=-]{0,199}$")


def check_batch_id(batch_id: str) -> str:
    """The batch id if it is safe as one folder name; ValueError naming it otherwise."""
    if not isinstance(batch_id, str) or not _BATCH_ID.match(batch_id) or ".." in batch_id:
        raise ValueError(f"batch_id {batch_id!r} must match {_BATCH_ID.pattern} (it becomes a folder name)")
    return batch_id


def render_markdown(outcome: ValidationOutcome, source: str) -> str:
    """A readable report: one table row per failed rule with its offending values."""
    lines = [
        f"# Quarantined batch `{outcome.batch_id}` of `{outcome.dataset}`",
        "",
        f"- contract: `{source}`",
        f"- rows: {outcome.rows if outcome.rows is not None else 'unknown'}",
        f"- errors: {len(outcome.errors)}, warnings: {len(outcome.warnings)}",
    ]
    if outcome.skipped:
        lines.append(f"- skipped rules: {', '.join(outcome.skipped)}")
    lines += ["", "| severity | rule | column | offending | sample values | detail |", "|---|---|---|---|---|---|"]
    for f in outcome.failures:
        sample = ", ".join(str(v) for v in f.sample).replace("|", "\\|")
        count = "" if f.unexpected_count is None else str(f.unexpected_count)
        detail = f.detail.replace("|", "\\|")
        lines.append(f"| {f.severity} | `{f.rule}` | {f.column or ''} | {count} | {sample} | {detail} |")
    return "\n".join(lines) + "\n"


def _write_batch(df: Any, folder: Path) -> None:
    if engine_of(df) == "pandas":
        df.to_parquet(folder / "batch.parquet", index=False)
    else:
        df.write.mode("error").parquet(str(folder / "batch"))


def write_quarantine(df: Any, outcome: ValidationOutcome, quarantine_root: str | Path, source: str) -> Path:
    """Write batch + reports to ``quarantine_root/<dataset>/<batch_id>`` and return that path."""
    base = Path(quarantine_root) / outcome.dataset
    final = base / check_batch_id(outcome.batch_id)
    base.mkdir(parents=True, exist_ok=True)
    tmp = base / f".tmp-{outcome.batch_id}-{uuid.uuid4().hex}"
    tmp.mkdir()
    try:
        outcome.quarantine_path = final
        _write_batch(df, tmp)
        (tmp / "report.json").write_text(json.dumps(outcome.to_dict(), indent=2, default=str) + "\n")
        (tmp / "report.md").write_text(render_markdown(outcome, source))
        old = None
        if final.exists():
            old = base / f".old-{outcome.batch_id}-{uuid.uuid4().hex}"
            os.replace(final, old)
        os.replace(tmp, final)
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
    except BaseException:
        outcome.quarantine_path = None
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return final
