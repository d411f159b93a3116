"""Check raw parquet files before Spark reads them: readable, right column types, right hour.

Use :func:`check_raw_files` before :func:`flinktune.etl.features.read_raw`. Spark reports a
truncated file or a column stored with another type deep inside a stack trace, mid-job; here each
file's footer is read with pyarrow (metadata only, about a millisecond per file) and a problem
raises :class:`RawFileError` naming the dataset, the rule, the file and what was found:

- ``file.readable``: the footer cannot be read (a truncated or foreign file);
- ``file.schema``: a raw column is missing or stored with another type;
- ``file.partition``: the row-group statistics put samples outside the file's ``date=/hour=``
  partition (a writer that partitioned by arrival time, or out-of-order / skewed timestamps).

Hidden files (``.``- or ``_``-prefixed, e.g. a temp file being renamed) are skipped, as Spark does.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

__all__ = ["FILE_TYPES", "RawFileError", "check_raw_files"]

_HOUR_MS = 3_600_000
#: Arrow types each stored raw column must have (job lives in the path).
FILE_TYPES: dict[str, tuple[pa.DataType, ...]] = {
    "metric": (pa.string(), pa.large_string()),
    "vertex": (pa.string(), pa.large_string()),
    "subtask": (pa.int32(),),
    "ts_ms": (pa.int64(),),
    "value": (pa.float64(),),
}


class RawFileError(ValueError):
    """A raw file cannot be used; ``rule`` and ``path`` say which check failed on which file."""

    def __init__(self, rule: str, path: Path, detail: str) -> None:
        self.rule, self.path = rule, path
        super().__init__(f"dataset 'raw_metrics' file {path}: rule {rule}: {detail}")


def _hour_of(path: Path) -> int | None:
    try:
        date, hour = path.parent.parent.name, path.parent.name
        if not (date.startswith("date=") and hour.startswith("hour=")):
            return None
        return int(pd.Timestamp(f"{date[5:]} {int(hour[5:]):02d}:00", tz="UTC").value // 10**6)
    except ValueError:
        return None


def check_raw_files(job_dir: Path, start_ms: int | None = None, end_ms: int | None = None) -> list[Path]:
    """The raw files of one job whose hour overlaps ``[start_ms, end_ms)``, each checked (see module doc)."""
    files = sorted(p for p in Path(job_dir).glob("date=*/hour=*/*.parquet") if not p.name.startswith((".", "_")))
    checked = []
    for f in files:
        hour = _hour_of(f)
        if hour is not None and (
            (start_ms is not None and hour + _HOUR_MS <= start_ms) or (end_ms is not None and hour >= end_ms)
        ):
            continue
        try:
            meta = pq.read_metadata(f)
        except (pa.ArrowException, OSError) as exc:
            raise RawFileError("file.readable", f, f"not a readable parquet file ({exc})") from None
        schema = meta.schema.to_arrow_schema()
        for col, types in FILE_TYPES.items():
            if col not in schema.names:
                raise RawFileError("file.schema", f, f"column {col!r} missing; columns: {schema.names}")
            got = schema.field(col).type
            if got not in types:
                raise RawFileError("file.schema", f, f"column {col!r} stored as {got}, expected {types[0]}")
        if hour is not None:
            lo, hi = _ts_bounds(meta, schema.get_field_index("ts_ms"))
            if lo is not None and hi is not None and (lo < hour or hi >= hour + _HOUR_MS):
                span = f"{pd.Timestamp(lo, unit='ms', tz='UTC')} .. {pd.Timestamp(hi, unit='ms', tz='UTC')}"
                raise RawFileError(
                    "file.partition", f, f"samples at ts_ms {lo}..{hi} ({span}) lie outside the file's hour partition"
                )
        checked.append(f)
    return checked


def _ts_bounds(meta: pq.FileMetaData, col: int) -> tuple[int | None, int | None]:
    lo = hi = None
    for g in range(meta.num_row_groups):
        stats = meta.row_group(g).column(col).statistics
        if stats is None or not stats.has_min_max:
            continue
        lo = stats.min if lo is None else min(lo, stats.min)
        hi = stats.max if hi is None else max(hi, stats.max)
    return lo, hi
