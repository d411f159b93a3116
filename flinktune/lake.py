"""The local metric lake: where raw samples, curated features and quarantined batches live.

Layout under the lake root (``var/lake`` by default)::

    raw/metrics/job=<job>/date=<YYYY-MM-DD>/hour=<HH>/part-<start_ms>-<end_ms>.parquet
    curated/<dataset>/job=<job>/...            written by the Spark ETL, validated
    quarantine/<dataset>/<batch_id>/           failing batch + validation report (JSON and Markdown)

Raw files are named by the batch's time range, so re-extracting a range rewrites the same files
(idempotent). Every write goes to a temporary name first and is renamed into place, so a crash
never leaves a half-written file where readers look.
"""

from __future__ import annotations

import os
import uuid
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from flinktune.metric_schema import RAW_COLUMNS, empty_frame, validate_frame

__all__ = ["Lake"]


class Lake:
    """Paths and atomic writes for one lake root."""

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root)

    @property
    def raw_metrics_dir(self) -> Path:
        return self.root / "raw" / "metrics"

    def curated_dir(self, dataset: str) -> Path:
        return self.root / "curated" / dataset

    def quarantine_dir(self, dataset: str) -> Path:
        return self.root / "quarantine" / dataset

    def raw_job_dir(self, job: str) -> Path:
        return self.raw_metrics_dir / f"job={job}"

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
            part = df.loc[idx, list(RAW_COLUMNS)].sort_values(["ts_ms", "metric", "vertex", "subtask"], kind="stable")
            d = self.raw_job_dir(str(job)) / f"date={date}" / f"hour={int(hour):02d}"
            name = f"part-{int(part['ts_ms'].iloc[0])}-{int(part['ts_ms'].iloc[-1])}.parquet"
            written.append(self._atomic_parquet(part.drop(columns=["job"]).reset_index(drop=True), d / name))
        return written

    def read_raw(
        self, job: str, start_ms: int | None = None, end_ms: int | None = None, *, metrics: list[str] | None = None
    ) -> pd.DataFrame:
        """Raw samples of one job in [start_ms, end_ms) with pyarrow (small reads: tests, the twin, decisions).

        Only the hour partitions that overlap the range are opened; ``metrics`` narrows the rows read.
        """
        base = self.raw_job_dir(job)
        files = sorted(base.glob("date=*/hour=*/*.parquet")) if base.exists() else []
        lo = None if start_ms is None else (start_ms // 3_600_000) * 3_600_000
        frames = []
        for f in files:
            hour_start = int(pd.Timestamp(f"{f.parent.parent.name[5:]} {f.parent.name[5:]}:00", tz="UTC").value // 10**6)
            if (lo is not None and hour_start < lo) or (end_ms is not None and hour_start >= end_ms):
                continue
            filters = [("metric", "in", list(metrics))] if metrics else None
            frames.append(pq.read_table(f, filters=filters).to_pandas())
        if not frames:
            return empty_frame()
        out = pd.concat(frames, ignore_index=True)
        out.insert(0, "job", job)
        if start_ms is not None:
            out = out[out["ts_ms"] >= start_ms]
        if end_ms is not None:
            out = out[out["ts_ms"] < end_ms]
        return validate_frame(out.reset_index(drop=True))

    @staticmethod
    def _atomic_parquet(df: pd.DataFrame, path: Path) -> Path:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex}.tmp")
        pq.write_table(pa.Table.from_pandas(df, preserve_index=False), tmp)
        os.replace(tmp, path)
        return path
