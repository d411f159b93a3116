"""Writes and reads of the curated feature datasets (``features_10s`` and ``features_1m``: same columns).

Use :func:`write_features` to merge newly computed feature rows of one job and a time range into
both datasets at once, and :func:`read_features` to read one back with pandas. Each day partition
holds one parquet file ``job=<job>/date=<YYYY-MM-DD>/part-<content hash>.parquet`` with a fixed
Arrow schema and rows sorted by ``window_start``, so rerunning the same window writes
byte-identical files under the same names.

Commit protocol: every affected partition of every dataset is written first under its new
(content-addressed) name beside the old file, then one snapshot pointer that names the live
files of both datasets is renamed into place (:mod:`flinktune.lake.snapshot`). Readers that list
files through the pointer (:meth:`flinktune.lake.Lake.dataset_files`) see both datasets old or
both new, whichever step a crash interrupts; files of an interrupted commit are removed before
the next one.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from flinktune.etl.features import FEATURE_COLUMNS, INT_COLUMNS
from flinktune.job_name import job_name
from flinktune.lake.atomic import atomic_write
from flinktune.lake.snapshot import adopt_folders, collect_garbage, commit_snapshot, snapshot_files

__all__ = ["FEATURES_SCHEMA", "part_name", "read_features", "to_features_frame", "write_features"]

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


def part_name(data: bytes) -> str:
    """The file name of a partition's content: equal content, equal name (reruns rewrite nothing new)."""
    return f"part-{hashlib.sha256(data).hexdigest()[:16]}.parquet"


def _days(start: pd.Timestamp, end: pd.Timestamp) -> list[str]:
    last = end - pd.Timedelta(microseconds=1)
    return [d.strftime("%Y-%m-%d") for d in pd.date_range(start.normalize(), last.normalize(), freq="D")]


def _check_rows(job: str, dataset: str, rows: pd.DataFrame, start: pd.Timestamp, end: pd.Timestamp) -> pd.DataFrame:
    rows = to_features_frame(rows)
    other_jobs = sorted(set(rows["job"].dropna()) - {job})
    if other_jobs:
        raise ValueError(f"{dataset} for job {job!r} contain rows of other job(s) {other_jobs}")
    outside = rows[(rows["window_start"] < start) | (rows["window_start"] >= end)]
    if len(outside):
        raise ValueError(
            f"{dataset} for job {job!r}: {len(outside)} row(s) outside [{start}, {end}), e.g. {outside['window_start'].iloc[0]}"
        )
    return rows


def _stage_dataset(
    job_dir: Path, live: list[Path], job: str, rows: pd.DataFrame, start: pd.Timestamp, end: pd.Timestamp
) -> list[Path]:
    """Write the dataset's affected day partitions under new names; returns every file of the new snapshot."""
    by_day: dict[str, list[Path]] = {}
    for f in live:
        by_day.setdefault(f.parent.name.removeprefix("date="), []).append(f)
    day_of = rows["window_start"].dt.strftime("%Y-%m-%d")
    for day in _days(start, end):
        new = rows[day_of == day]
        old_files = by_day.pop(day, [])
        if old_files:
            old = pd.concat([pq.read_table(f).to_pandas() for f in old_files], ignore_index=True)
            old.insert(0, "job", job)
            keep = old[(old["window_start"] < start) | (old["window_start"] >= end)]
            new = pd.concat([to_features_frame(keep), new], ignore_index=True) if len(keep) else new
        if new.empty:
            continue  # a day left with no rows loses its partition
        new = new.sort_values("window_start", kind="stable")
        table = pa.Table.from_pandas(new.drop(columns=["job"]), schema=FEATURES_SCHEMA, preserve_index=False)
        sink = pa.BufferOutputStream()
        pq.write_table(table, sink, compression="snappy")
        data = sink.getvalue().to_pybytes()
        by_day[day] = [atomic_write(job_dir / f"date={day}" / part_name(data), data)]
    return sorted(f for files in by_day.values() for f in files)


def write_features(
    curated_root: str | Path, job: str, frames: Mapping[str, pd.DataFrame], start_ms: int, end_ms: int
) -> dict[str, list[Path]]:
    """Replace ``job``'s rows with ``window_start`` in ``[start_ms, end_ms)`` in each dataset of ``frames``.

    ``frames`` maps a dataset name (a folder under ``curated_root``) to its new rows, which must
    all belong to ``job`` and the range (checked before anything is written). Every dataset
    switches in the same commit. Returns the live files of each dataset after the commit.
    """
    root = Path(curated_root)
    job = job_name(job)
    start, end = pd.Timestamp(start_ms, unit="ms", tz="UTC"), pd.Timestamp(end_ms, unit="ms", tz="UTC")
    checked = {ds: _check_rows(job, ds, rows, start, end) for ds, rows in frames.items()}
    adopt_folders(root, job, list(checked))  # the pointer exists before any new file: first commits are atomic too
    collect_garbage(root, job)  # files of an interrupted commit
    staged = {
        ds: _stage_dataset(root / ds / f"job={job}", snapshot_files(root, ds, job), job, rows, start, end)
        for ds, rows in checked.items()
    }
    commit_snapshot(root, job, staged)
    return staged


def read_features(
    curated_root: str | Path, dataset: str, job: str, start_ms: int | None = None, end_ms: int | None = None
) -> pd.DataFrame:
    """Curated ``dataset`` of ``job`` in ``[start_ms, end_ms)`` (all when None), sorted by window."""
    files = snapshot_files(curated_root, dataset, job)
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
