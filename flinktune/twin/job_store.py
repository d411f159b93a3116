"""Where a simulated job lives between Airflow tasks: ``<twin_dir>/<job>/twin.json`` and its trace.

``jobs.simulate`` writes both; ``jobs.decide`` and ``jobs.profile`` read them back. The trace is
the full input-rate series (longer than what was simulated), so a later task continues the same
trace where the twin's clock stands: use :func:`upcoming_rates`.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from flinktune.job_name import job_name
from flinktune.lake.atomic import atomic_write_with
from flinktune.twin.simulator import TwinJob

__all__ = ["TRACE_FILE", "TWIN_FILE", "job_dir", "load_job", "load_trace", "save_job", "upcoming_rates"]

TWIN_FILE = "twin.json"
TRACE_FILE = "trace.parquet"


def job_dir(twin_dir: str | Path, job: str) -> Path:
    """``<twin_dir>/<job>``, for a valid job name only (never a path outside ``twin_dir``)."""
    return Path(twin_dir) / job_name(job)


def save_job(twin_dir: str | Path, twin: TwinJob, trace: pd.Series) -> dict[str, str]:
    """Persist the twin and its trace atomically; returns the two paths."""
    d = job_dir(twin_dir, twin.job)
    d.mkdir(parents=True, exist_ok=True)
    trace_path = atomic_write_with(d / TRACE_FILE, trace.rename("rate").to_frame().to_parquet)
    twin_path = twin.save(d / TWIN_FILE)
    return {"twin": str(twin_path), "trace": str(trace_path)}


def load_trace(twin_dir: str | Path, job: str) -> pd.Series:
    """The persisted trace of ``job`` (UTC DatetimeIndex, name ``rate``)."""
    path = job_dir(twin_dir, job) / TRACE_FILE
    if not path.exists():
        raise FileNotFoundError(f"{path}: no trace for job {job!r}; run jobs.simulate first")
    return pd.read_parquet(path)["rate"]


def load_job(twin_dir: str | Path, job: str) -> tuple[TwinJob, pd.Series]:
    """The persisted twin of ``job`` and its trace."""
    path = job_dir(twin_dir, job) / TWIN_FILE
    if not path.exists():
        raise FileNotFoundError(f"{path}: no twin for job {job!r}; run jobs.simulate first")
    return TwinJob.load(path), load_trace(twin_dir, job)


def upcoming_rates(trace: pd.Series, twin: TwinJob, seconds: int) -> np.ndarray:
    """The next ``seconds`` rates of ``trace`` from the twin's clock on (raises when the trace runs out)."""
    idx = trace.index.as_unit("ns").asi8 // 10**9
    pos = int(np.searchsorted(idx, twin.now))
    if pos >= len(idx) or idx[pos] != twin.now:
        raise ValueError(f"trace has no sample at the twin's time {twin.now} (trace covers {idx[0]}..{idx[-1]})")
    if pos + seconds > len(idx):
        raise ValueError(f"trace ends {len(idx) - pos} s after the twin's time {twin.now}; {seconds} s were asked for")
    return trace.to_numpy(dtype=float)[pos : pos + seconds]
