"""The one atomic writer: write beside the target under a hidden name, then rename over it.

It lives with the lake, its main user; every other file a reader may meet half-written goes through
it too (the twin's state and profile, local Flink's state, config and rate files, the local Airflow
home's marker, a DAG run's result, and the saved models: a surrogate's file, a forecaster's folder).

Use :func:`atomic_write` (bytes), :func:`atomic_write_with` (a writer that takes a path, e.g.
``pq.write_table``) or :func:`atomic_parquet` (a pandas frame) for every file a reader may open
while it is being written, and ``with atomic_dir(path) as tmp:`` for a folder. A crash leaves either the old file or the new one, plus at most a
hidden ``.<name>.<uuid>.tmp`` that readers skip (they ignore ``.``- and ``_``-prefixed names).
"""

from __future__ import annotations

import os
import shutil
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

__all__ = ["atomic_dir", "atomic_parquet", "atomic_write", "atomic_write_with"]


def atomic_write_with(path: str | Path, write: Callable[[Path], object]) -> Path:
    """Call ``write(tmp)`` on a hidden temporary path beside ``path``, then rename it to ``path``."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex}.tmp")
    try:
        write(tmp)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)  # only left when write or the rename failed
    return path


def atomic_write(path: str | Path, data: bytes) -> Path:
    """Write ``data`` to ``path`` atomically."""
    return atomic_write_with(path, lambda tmp: tmp.write_bytes(data))


def atomic_parquet(df: pd.DataFrame, path: str | Path) -> Path:
    """Write ``df`` (no index) as parquet to ``path`` atomically."""
    table = pa.Table.from_pandas(df, preserve_index=False)
    return atomic_write_with(path, lambda tmp: pq.write_table(table, tmp))


@contextmanager
def atomic_dir(path: str | Path) -> Iterator[Path]:
    """A hidden folder beside ``path`` to write into; it replaces ``path`` when the block exits
    cleanly, and is removed on an error (``path`` untouched)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex}.tmp")
    tmp.mkdir()
    try:
        yield tmp
        if path.exists():
            shutil.rmtree(path)
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp)
