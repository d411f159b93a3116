"""Hour-aligned chunks and the idempotent raw writer every extractor streams into.

Use :func:`hour_chunks` to cut ``[start_ms, end_ms)`` into pieces that never cross an hour (the raw
partition unit), and :class:`RawSink` to write one piece's samples of one job::

    sink = RawSink(Lake(settings.lake_dir))
    for lo, hi in hour_chunks(start_ms, end_ms, chunk_s=900):
        sink.write(job, frame_for(lo, hi), lo, hi)

A chunk is stored as ``job=<job>/date=<day>/hour=<HH>/part-<lo>-<hi - 1>.parquet`` (the lake's
"first-last millisecond" naming) whatever samples it holds, so re-extracting the same range
rewrites the same file. Files of the same hour whose range overlaps the chunk (an earlier
extraction with other chunk bounds, or the twin's own files) are removed after the new file is
renamed into place (a file only partly inside the chunk is rewritten without the chunk's samples):
a re-extraction replaces, never duplicates. A crash between the rename and the
removal can leave both; the raw contract's uniqueness rule then stops the ETL with the duplicate
keys named, so it is never silently double-counted.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd
import pyarrow.parquet as pq

from flinktune.lake import Lake
from flinktune.metrics.schema import RAW_COLUMNS, validate_frame

__all__ = ["HOUR_MS", "ExtractError", "ExtractResult", "RawSink", "hour_chunks"]

HOUR_MS = 3_600_000
_PART = re.compile(r"^part-(\d+)-(\d+)\.parquet$")


class ExtractError(RuntimeError):
    """An extraction failed; the message names the source, the job, the range and what was wrong."""


@dataclass
class ExtractResult:
    """What one extraction wrote: rows and files per run, chunks done, metrics the source lacked."""

    job: str
    source: str
    start_ms: int
    end_ms: int
    rows: int = 0
    chunks: int = 0
    files: list[str] = field(default_factory=list)
    missing_metrics: list[str] = field(default_factory=list)

    def to_dict(self) -> dict:
        return {
            "job": self.job,
            "source": self.source,
            "start_ms": int(self.start_ms),
            "end_ms": int(self.end_ms),
            "rows": int(self.rows),
            "chunks": int(self.chunks),
            "files": list(self.files),
            "missing_metrics": list(self.missing_metrics),
        }


def hour_chunks(start_ms: int, end_ms: int, *, chunk_s: int = 900) -> list[tuple[int, int]]:
    """``[lo, hi)`` pieces of at most ``chunk_s`` covering ``[start_ms, end_ms)``, split at every hour."""
    if end_ms <= start_ms:
        raise ValueError(f"empty range: end_ms {end_ms} must be after start_ms {start_ms}")
    if chunk_s <= 0 or 3600 % chunk_s:
        raise ValueError(f"chunk_s must divide an hour (e.g. 300, 900, 3600), got {chunk_s}")
    step = chunk_s * 1000
    out: list[tuple[int, int]] = []
    lo = start_ms
    while lo < end_ms:
        hi = min(end_ms, (lo // step + 1) * step)  # chunk_s divides the hour: chunks never cross one
        out.append((lo, hi))
        lo = hi
    return out


class RawSink:
    """Writes extracted chunks into ``lake.raw_metrics_dir`` (atomic, replacing overlaps)."""

    def __init__(self, lake: Lake) -> None:
        self.lake = lake

    def path_for(self, job: str, lo: int, hi: int) -> Path:
        """Where the chunk ``[lo, hi)`` of ``job`` lives (``lo`` and ``hi - 1`` in one hour)."""
        if lo // HOUR_MS != (hi - 1) // HOUR_MS:
            raise ValueError(f"chunk [{lo}, {hi}) crosses an hour; cut it with hour_chunks")
        t = pd.Timestamp(lo, unit="ms", tz="UTC")
        return self.lake.raw_job_dir(job) / f"date={t:%Y-%m-%d}" / f"hour={t.hour:02d}" / f"part-{lo}-{hi - 1}.parquet"

    def write(self, job: str, df: pd.DataFrame, lo: int, hi: int, *, where: str) -> Path | None:
        """Store ``df`` (raw schema, all of ``job``, ``lo <= ts_ms < hi``) as the chunk's file.

        An empty frame removes the chunk's overlapping files and writes nothing (the source has no
        samples there now). Returns the file written, or None.
        """
        df = validate_frame(df, where=where)
        if len(df):
            other = sorted(set(df["job"].unique()) - {job})
            if other:
                raise ExtractError(f"{where}: rows of other job(s) {other} in a chunk of job {job!r}")
            ts = df["ts_ms"]
            if int(ts.min()) < lo or int(ts.max()) >= hi:
                raise ExtractError(f"{where}: samples at {int(ts.min())}..{int(ts.max())} outside the chunk [{lo}, {hi})")
        target = self.path_for(job, lo, hi)
        written = None
        if len(df):
            part = df.sort_values(["ts_ms", "metric", "vertex", "subtask"], kind="stable")[list(RAW_COLUMNS)]
            written = self.lake.write_raw_file(part.drop(columns=["job"]).reset_index(drop=True), target)
        self._drop_overlaps(self.lake, target, lo, hi - 1)
        return written

    @staticmethod
    def _drop_overlaps(lake: Lake, target: Path, first: int, last: int) -> None:
        if not target.parent.is_dir():
            return
        for f in target.parent.iterdir():
            m = _PART.match(f.name)
            if f == target or not m:
                continue
            a, b = int(m.group(1)), int(m.group(2))
            if a > last or b < first:
                continue
            if first <= a and b <= last:
                f.unlink(missing_ok=True)
                continue
            # Partly overlapping (e.g. the twin's whole-hour file): keep its samples outside the chunk.
            old = pq.read_table(f).to_pandas()
            keep = old[(old["ts_ms"] < first) | (old["ts_ms"] > last)].reset_index(drop=True)
            if len(keep):
                lake.write_raw_file(keep, f)
            else:
                f.unlink(missing_ok=True)
