"""The lake's datasets under one root: raw samples, curated features, profiling observations, quarantine.

Use :class:`Lake` for every path into the lake and every read and write of it; nothing else
builds lake paths. Layout under the lake root (``var/lake`` by default)::

    raw/metrics/job=<job>/date=<YYYY-MM-DD>/hour=<HH>/part-<start_ms>-<end_ms>.parquet
    curated/<dataset>/job=<job>/...            validated; the ETL's datasets through a snapshot
                                               pointer (:mod:`flinktune.lake.snapshot`)
    curated/profiling_observations/job=<job>/part-<runhash>.parquet
    quarantine/<dataset>/<batch_id>/           failing batch + validation report (JSON and Markdown)
    quality/gx/                                the contracts' GX project: checkpoints, results, Data Docs
    quality/batches.jsonl                      every validated batch, passed or quarantined, and why

Raw files are named by the batch's time range, so re-extracting a range rewrites the same files
(idempotent). Every write goes through :mod:`flinktune.lake.atomic`, so a crash never leaves a
half-written file where readers look. Job names are checked (:func:`flinktune.job_name.job_name`)
before they become part of a path.
"""

from __future__ import annotations

import functools
import logging
from pathlib import Path

import pandas as pd
import pyarrow.parquet as pq

from flinktune.job_name import job_name
from flinktune.lake.atomic import atomic_parquet
from flinktune.lake.snapshot import snapshot_files
from flinktune.metrics.schema import RAW_COLUMNS, empty_frame, validate_frame

_log = logging.getLogger(__name__)

__all__ = ["PROFILING_OBSERVATIONS", "Lake"]

#: The curated dataset of profiling runs (one file per batch of runs, written by ``jobs.profile``).
PROFILING_OBSERVATIONS = "profiling_observations"


class Lake:
    """Paths and atomic writes for one lake root."""

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root)

    @property
    def raw_metrics_dir(self) -> Path:
        return self.root / "raw" / "metrics"

    @property
    def curated_root(self) -> Path:
        return self.root / "curated"

    def curated_dir(self, dataset: str) -> Path:
        return self.curated_root / dataset

    def curated_job_dir(self, dataset: str, job: str) -> Path:
        return self.curated_dir(dataset) / f"job={job_name(job)}"

    @property
    def quarantine_root(self) -> Path:
        """The folder whose ``<dataset>/<batch_id>`` children hold quarantined batches (``validate``'s root)."""
        return self.root / "quarantine"

    @property
    def quality_root(self) -> Path:
        """The contracts' GX project folder (``validate``'s ``gx_project``): Data Docs and the batch log."""
        return self.root / "quality"

    @property
    def data_docs_index(self) -> Path:
        """The GX Data Docs front page (there once a batch has been validated)."""
        return self.quality_root / "gx" / "uncommitted" / "data_docs" / "local_site" / "index.html"

    def quarantine_dir(self, dataset: str) -> Path:
        return self.quarantine_root / dataset

    def raw_job_dir(self, job: str) -> Path:
        return self.raw_metrics_dir / f"job={job_name(job)}"

    def dataset_files(self, dataset: str, job: str) -> list[Path]:
        """The live parquet files of a curated dataset for ``job`` (the snapshot's, see :mod:`.snapshot`)."""
        return snapshot_files(self.curated_root, dataset, job)

    def read_dataset(self, dataset: str, job: str, columns: list[str] | None = None) -> list[pd.DataFrame]:
        """One frame per live file of ``dataset`` for ``job`` (no files: ``[]``).

        A commit finishing between listing and opening removes the old files: the listing is then
        taken again, once, so the frames are always one whole snapshot.
        """
        for attempt in (0, 1):
            files = self.dataset_files(dataset, job)
            try:
                return [pq.read_table(f, columns=columns).to_pandas() for f in files]
            except FileNotFoundError:
                if attempt:
                    raise
        return []  # pragma: no cover - the loop returns or raises

    def write_observations(self, df: pd.DataFrame, job: str, name: str) -> Path:
        """Write a batch of profiling observations of ``job`` (no ``job`` column) as ``<name>.parquet``."""
        if "/" in name or name.startswith((".", "_")):
            raise ValueError(f"{PROFILING_OBSERVATIONS}: file name {name!r} must be a plain visible name")
        return atomic_parquet(df, self.curated_job_dir(PROFILING_OBSERVATIONS, job) / f"{name}.parquet")

    def write_raw_file(self, part: pd.DataFrame, path: Path) -> Path:
        """Write one raw file (raw schema without ``job``) at ``path`` inside the raw metrics folder."""
        if self.raw_metrics_dir.resolve() not in Path(path).resolve().parents:
            raise ValueError(f"raw file {path} is outside the lake's raw metrics folder {self.raw_metrics_dir}")
        return atomic_parquet(part, path)

    def write_raw(self, df: pd.DataFrame, *, where: str = "raw metrics") -> list[Path]:
        """Write raw samples partitioned by job, date and hour; returns the files written.

        The frame must have the raw schema; it may span several jobs and hours. One file per
        (job, hour) named by the samples' first and last timestamps in that partition.
        """
        df = validate_frame(df, where=where)
        if df.empty:
            return []
        ts = pd.to_datetime(df["ts_ms"], unit="ms", utc=True)
        keys = pd.DataFrame({"job": df["job"], "date": ts.dt.strftime("%Y-%m-%d"), "hour": ts.dt.hour})
        written: list[Path] = []
        for (job, date, hour), idx in keys.groupby(["job", "date", "hour"], sort=True).groups.items():
            # By time only, stable: within a second the rows keep the source's order, and evaluation lists
            # vertices in that order (topological for Flink and the twin; the first is the source).
            part = df.loc[idx, list(RAW_COLUMNS)].sort_values("ts_ms", kind="stable")
            d = self.raw_job_dir(str(job)) / f"date={date}" / f"hour={int(hour):02d}"
            name = f"part-{int(part['ts_ms'].iloc[0])}-{int(part['ts_ms'].iloc[-1])}.parquet"
            written.append(atomic_parquet(part.drop(columns=["job"]).reset_index(drop=True), d / name))
        return written

    def read_raw(
        self, job: str, start_ms: int | None = None, end_ms: int | None = None, *, metrics: list[str] | None = None
    ) -> pd.DataFrame:
        """Raw samples of one job in [start_ms, end_ms) with pyarrow (small reads: tests, the twin, decisions).

        Only the hour partitions that overlap the range are opened, and within them only the files
        whose name's time span (``part-<first ms>-<last ms>``, as :meth:`write_raw` names them)
        overlaps it; ``metrics`` narrows the rows read.
        """
        base = self.raw_job_dir(job)
        files = sorted(base.glob("date=*/hour=*/*.parquet")) if base.exists() else []
        lo = None if start_ms is None else (start_ms // 3_600_000) * 3_600_000
        frames = []
        for f in files:
            hour_start = int(pd.Timestamp(f"{f.parent.parent.name[5:]} {f.parent.name[5:]}:00", tz="UTC").value // 10**6)
            if (lo is not None and hour_start < lo) or (end_ms is not None and hour_start >= end_ms):
                continue
            # The decision task on the twin writes a file a minute (the watch's pieces): a window
            # read opens the few it needs, not the hour's sixty.
            span = _file_span(f.name)
            if span is not None and ((start_ms is not None and span[1] < start_ms) or (end_ms is not None and span[0] >= end_ms)):
                continue
            frames.append(_own_rows(_read_raw_file(f, tuple(metrics) if metrics else None), job, f))
        if not frames:
            return empty_frame()
        out = pd.concat(frames, ignore_index=True)
        out.insert(0, "job", job)
        if start_ms is not None:
            out = out[out["ts_ms"] >= start_ms]
        if end_ms is not None:
            out = out[out["ts_ms"] < end_ms]
        return validate_frame(out.reset_index(drop=True))


def _own_rows(frame: pd.DataFrame, job: str, path: Path) -> pd.DataFrame:
    """``frame`` without the rows that name another job in a ``job`` column of the file itself (a
    writer that put them in the wrong partition); they are dropped with a warning naming the file."""
    if "job" not in frame.columns:
        return frame
    foreign = frame["job"].notna() & (frame["job"].astype(str) != job)
    if foreign.any():
        others = sorted(set(frame.loc[foreign, "job"].astype(str)))[:3]
        _log.warning("%s: %d row(s) of job(s) %s inside job %r's partition dropped", path, int(foreign.sum()), others, job)
    return frame.loc[~foreign].drop(columns=["job"])


def _read_raw_file(path: Path, metrics: tuple[str, ...] | None) -> pd.DataFrame:
    """One raw file's rows (of ``metrics`` only, if given), through a cache keyed by the file's identity."""
    st = path.stat()
    return _read_raw_file_cached(str(path), st.st_ino, st.st_mtime_ns, st.st_size, metrics)


@functools.lru_cache(maxsize=1024)
def _read_raw_file_cached(path: str, inode: int, mtime_ns: int, size: int, metrics: tuple[str, ...] | None) -> pd.DataFrame:
    # Raw files are written once, atomically (a rewrite is a new inode), so the identity is the content.
    # The decision loop reads the same recent files every minute (the watch, the window, the
    # forecaster's history): parsing each once is most of its read time. Callers only concatenate it.
    filters = [("metric", "in", list(metrics))] if metrics else None
    return pq.read_table(path, filters=filters).to_pandas()


def _file_span(name: str) -> tuple[int, int] | None:
    """(first, last) sample time of a raw file named ``part-<first ms>-<last ms>.parquet``; None otherwise."""
    parts = name.removesuffix(".parquet").split("-")
    if len(parts) != 3 or parts[0] != "part" or not (parts[1].isdigit() and parts[2].isdigit()):
        return None
    return int(parts[1]), int(parts[2])
