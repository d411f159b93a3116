"""Write model files and folders so that readers see the old one or the whole new one, never half.

Use ``with atomic_dir(path) as tmp: <write files into tmp>`` for a folder and
``with atomic_file(path) as tmp: <write tmp>`` for one file: the writes go to a hidden sibling
that replaces ``path`` only when the block succeeds; on an error the sibling is removed and
``path`` is untouched.
"""

from __future__ import annotations

import os
import shutil
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

__all__ = ["atomic_dir", "atomic_file"]


@contextmanager
def atomic_dir(path: str | Path) -> Iterator[Path]:
    """A temporary folder beside ``path`` that becomes ``path`` when the block exits cleanly."""
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


@contextmanager
def atomic_file(path: str | Path) -> Iterator[Path]:
    """A temporary file name beside ``path`` that becomes ``path`` when the block exits cleanly."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex}.tmp")
    try:
        yield tmp
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
