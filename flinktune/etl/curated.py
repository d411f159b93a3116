"""Stage-then-commit writes of curated partitions (``job=<job>/date=<YYYY-MM-DD>/part-00000.parquet``).

Use :func:`write_features` to merge newly computed feature rows (``features_10s`` or
``features_1m``: same columns) for one job and a time range into a curated dataset, and :func:`read_features` to read them back with pandas. Each
partition holds one parquet file with a fixed Arrow schema, rows sorted by ``window_start``, so
rerunning the same window writes byte-identical files.

Commit protocol (a crash at any point leaves every partition either old or new, never half):

1. Build each affected partition in ``<dataset>/_staging/<uuid>/``: the existing rows outside the
   recomputed range plus the new rows (so a partial-day rerun keeps the rest of the day).
2. :func:`commit`: per partition, move the live folder to ``_trash/<uuid>/``, move the staged one
   into place, then delete the trash. Readers (Spark, pyarrow) skip ``_``-prefixed folders.
3. :func:`recover` (run before every write) puts back a trashed partition whose live folder is
   missing (a crash between the two moves) and clears leftovers.
"""

from __future__ import annotations

import os
import shutil
import uuid
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from flinktune.etl.features import FEATURE_COLUMNS, INT_COLUMNS

__all__ = ["FEATURES_SCHEMA", "PART_FILE", "write_features", "read_features", "commit", "recover", "to_features_frame"]

PART_FILE = "part-00000.parquet"
_STAGING, _TRASH = "_staging", "_trash"

#: Columns stored in a features file of either grain (job and date live in the partition path).
FEATURES_SCHEMA = pa.schema(
    [pa.field("window_start", pa.timestamp("us", tz="UTC"), nullable=False)]
    + [pa.field(c, pa.int64() if c in INT_COLUMNS else pa.float64()) for c in FEATURE_COLUMNS if c not in ("job", "window_start")]
)


def to_features_frame(df: pd.DataFrame) -> pd.DataFrame:
    """Normalise dtypes: ``job`` string, ``window_start`` UTC (us), ints nullable Int64, the rest float64."""
    missing = [c for c in FEATURE_COLUMNS if c not in df.columns]
    if missing:
        raise ValueError(f"features frame lacks column(s) {missing}; expected {list(FEATURE_COLUMNS)}")
    out = df[list(FEATURE_COLUMNS)].copy()
    out["job"] = out["job"].astype("string")
    ws = pd.to_datetime(out["window_start"], utc=True)
    out["window_start"] = ws.astype("datetime64[us, UTC]")
    for c in FEATURE_COLUMNS[2:]:
        out[c] = out[c].round().astype("Int64") if c in INT_COLUMNS else out[c].astype("float64")
    return out.reset_index(drop=True)


def _partition(root: Path, job: str, date: str) -> Path:
    return root / f"job={job}" / f"date={date}"


def recover(root: Path) -> None:
    """Undo a crash between the two moves of :func:`commit`, and drop stale staging folders."""
    trash = root / _TRASH
    if trash.is_dir():
        for moved in sorted(trash.glob("*/job=*/date=*")):
            live = root / moved.parent.name / moved.name
            if not live.exists():
                live.parent.mkdir(parents=True, exist_ok=True)
                os.replace(moved, live)
        shutil.rmtree(trash)
    shutil.rmtree(root / _STAGING, ignore_errors=True)


def commit(root: Path, staged: dict[Path, Path | None]) -> None:
    """Swap staged partition folders into place (``None`` removes the live partition)."""
    trash = root / _TRASH / uuid.uuid4().hex
    for live, new in sorted(staged.items(), key=lambda kv: str(kv[0])):
        if live.exists():
            backup = trash / live.parent.name / live.name
            backup.parent.mkdir(parents=True, exist_ok=True)
            os.replace(live, backup)  # keep the old until the new is in place
        if new is not None:
            live.parent.mkdir(parents=True, exist_ok=True)
            os.replace(new, live)
    shutil.rmtree(trash, ignore_errors=True)


def _days(start: pd.Timestamp, end: pd.Timestamp) -> list[str]:
    last = end - pd.Timedelta(microseconds=1)
    return [d.strftime("%Y-%m-%d") for d in pd.date_range(start.normalize(), last.normalize(), freq="D")]


def write_features(root: str | Path, job: str, rows: pd.DataFrame, start_ms: int, end_ms: int) -> list[Path]:
    """Replace ``job``'s rows with ``window_start`` in ``[start_ms, end_ms)`` by ``rows``; returns live files.

    ``rows`` must all belong to ``job`` and the range (checked). Affected partitions are the days
    the range touches; a day left with no rows loses its partition.
    """
    root = Path(root)
    rows = to_features_frame(rows)
    start, end = pd.Timestamp(start_ms, unit="ms", tz="UTC"), pd.Timestamp(end_ms, unit="ms", tz="UTC")
    other_jobs = sorted(set(rows["job"].dropna()) - {job})
    if other_jobs:
        raise ValueError(f"features for job {job!r} contain rows of other job(s) {other_jobs}")
    outside = rows[(rows["window_start"] < start) | (rows["window_start"] >= end)]
    if len(outside):
        raise ValueError(f"features for job {job!r}: {len(outside)} row(s) outside [{start}, {end}), e.g. {outside['window_start'].iloc[0]}")
    recover(root)
    staging = root / _STAGING / uuid.uuid4().hex
    staged: dict[Path, Path | None] = {}
    written: list[Path] = []
    try:
        day_of = rows["window_start"].dt.strftime("%Y-%m-%d")
        for day in _days(start, end):
            live = _partition(root, job, day)
            new = rows[day_of == day]
            if (live / PART_FILE).exists():
                old = pq.read_table(live / PART_FILE).to_pandas()
                old.insert(0, "job", job)
                keep = old[(old["window_start"] < start) | (old["window_start"] >= end)]
                new = pd.concat([to_features_frame(keep), new], ignore_index=True) if len(keep) else new
            elif new.empty:
                continue
            if new.empty:
                staged[live] = None
                continue
            new = new.sort_values("window_start", kind="stable")
            target = _partition(staging, job, day)
            target.mkdir(parents=True)
            table = pa.Table.from_pandas(new.drop(columns=["job"]), schema=FEATURES_SCHEMA, preserve_index=False)
            pq.write_table(table, target / PART_FILE, compression="snappy")
            staged[live] = target
            written.append(live / PART_FILE)
        commit(root, staged)
    finally:
        shutil.rmtree(root / _STAGING, ignore_errors=True)
    return written


def read_features(root: str | Path, job: str, start_ms: int | None = None, end_ms: int | None = None) -> pd.DataFrame:
    """Curated features of ``job`` in ``[start_ms, end_ms)`` (all when None), sorted by window."""
    files = sorted(Path(root).glob(f"job={job}/date=*/{PART_FILE}"))
    frames = [pq.read_table(f).to_pandas() for f in files]
    if not frames:
        return to_features_frame(pd.DataFrame({c: [] for c in FEATURE_COLUMNS}))
    out = pd.concat(frames, ignore_index=True)
    out.insert(0, "job", job)
    out = to_features_frame(out)
    if start_ms is not None:
        out = out[out["window_start"] >= pd.Timestamp(start_ms, unit="ms", tz="UTC")]
    if end_ms is not None:
        out = out[out["window_start"] < pd.Timestamp(end_ms, unit="ms", tz="UTC")]
    return out.sort_values("window_start", kind="stable").reset_index(drop=True)
