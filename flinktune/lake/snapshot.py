"""Versioned snapshots of a job's curated datasets: a pointer file, written last, names every live file.

Use :func:`commit_snapshot` to publish new files of several datasets of one job at once (the ETL
publishes ``features_1m`` and ``features_10s`` together), and :func:`snapshot_files` to list the
live files of one dataset. Layout under the curated root::

    <dataset>/job=<job>/date=<YYYY-MM-DD>/part-<content hash>.parquet   data files (never rewritten in place)
    _snapshots/job=<job>.json                                             the pointer

The pointer maps each dataset to its files (relative to ``<dataset>/job=<job>/``). A commit writes
the new data files under new names beside the old ones, then replaces the pointer in one rename:
readers that go through the pointer see the whole old snapshot or the whole new one, never a mix,
whichever step a crash interrupts. Files the pointer does not name (left by an interrupted commit,
or replaced by a newer one) are removed after the pointer is written and again before the next
commit. A dataset the pointer does not know (written before snapshots, or by hand in a test) is
listed from its folder; a writer calls :func:`adopt_folders` first, so that even a job's first
commit goes through the pointer.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path

from flinktune.job_name import job_name
from flinktune.lake.atomic import atomic_write

__all__ = [
    "SNAPSHOT_DIR",
    "SnapshotError",
    "adopt_folders",
    "collect_garbage",
    "commit_snapshot",
    "read_snapshot",
    "snapshot_files",
    "snapshot_path",
]

SNAPSHOT_DIR = "_snapshots"


class SnapshotError(ValueError):
    """A snapshot pointer that cannot be read or that names a missing file; the message names the pointer."""


def snapshot_path(curated_root: str | Path, job: str) -> Path:
    return Path(curated_root) / SNAPSHOT_DIR / f"job={job_name(job)}.json"


def read_snapshot(curated_root: str | Path, job: str) -> dict[str, list[str]]:
    """``{dataset: [relative file, ...]}`` of the job's last commit; ``{}`` before the first."""
    path = snapshot_path(curated_root, job)
    if not path.is_file():
        return {}
    try:
        data = json.loads(path.read_text())
        datasets = data["datasets"]
        if not isinstance(datasets, dict) or not all(isinstance(v, list) for v in datasets.values()):
            raise TypeError("'datasets' must map each dataset to a list of files")
    except (ValueError, KeyError, TypeError) as exc:
        raise SnapshotError(f"snapshot pointer {path}: unreadable ({exc}); rerun the ETL for job {job!r} to rewrite it") from None
    return {str(ds): [str(f) for f in files] for ds, files in datasets.items()}


def _folder_files(job_dir: Path) -> list[Path]:
    if not job_dir.is_dir():
        return []
    return sorted(
        p for p in job_dir.rglob("*.parquet") if not any(part.startswith((".", "_")) for part in p.relative_to(job_dir).parts)
    )


def snapshot_files(curated_root: str | Path, dataset: str, job: str) -> list[Path]:
    """The live files of ``dataset`` for ``job``: the pointer's, else every visible file in its folder."""
    job_dir = Path(curated_root) / dataset / f"job={job_name(job)}"
    listed = read_snapshot(curated_root, job).get(dataset)
    if listed is None:
        return _folder_files(job_dir)
    return [job_dir / rel for rel in sorted(listed)]


def commit_snapshot(curated_root: str | Path, job: str, datasets: Mapping[str, Sequence[str | Path]]) -> Path:
    """Make ``datasets`` (``{dataset: files}``, absolute or relative to ``<dataset>/job=<job>/``) the live snapshot.

    The files must already be written (each atomically); datasets left out keep their current files.
    """
    root = Path(curated_root)
    current = read_snapshot(root, job)
    for ds, files in datasets.items():
        job_dir = root / ds / f"job={job_name(job)}"
        rel = sorted({str(Path(f).relative_to(job_dir)) if Path(f).is_absolute() else str(f) for f in files})
        missing = [r for r in rel if not (job_dir / r).is_file()]
        if missing:
            raise SnapshotError(f"snapshot of job {job!r}: dataset {ds} names missing file(s) {missing[:3]} under {job_dir}")
        current[ds] = rel
    body = json.dumps({"job": job, "datasets": dict(sorted(current.items()))}, indent=1, sort_keys=True) + "\n"
    path = atomic_write(snapshot_path(root, job), body.encode())  # the one step that switches every dataset
    collect_garbage(root, job)
    return path


def adopt_folders(curated_root: str | Path, job: str, datasets: Sequence[str]) -> None:
    """Before a commit: name in the pointer each of ``datasets`` it does not know yet, with the files
    its folder holds now (none, on a job's first commit). Then the commit's new files stay invisible
    until its own pointer names them: a first commit killed half-way leaves readers the whole old
    state (nothing), not ``features_1m`` without ``features_10s``."""
    root = Path(curated_root)
    unknown = [ds for ds in datasets if ds not in read_snapshot(root, job)]
    if unknown:
        commit_snapshot(root, job, {ds: _folder_files(root / ds / f"job={job_name(job)}") for ds in unknown})


def collect_garbage(curated_root: str | Path, job: str) -> list[Path]:
    """Remove files of the pointer's datasets that the pointer does not name (and emptied folders)."""
    root = Path(curated_root)
    removed = []
    for ds, rel in read_snapshot(root, job).items():
        job_dir = root / ds / f"job={job_name(job)}"
        keep = {job_dir / r for r in rel}
        for f in _folder_files(job_dir):
            if f not in keep:
                f.unlink(missing_ok=True)
                removed.append(f)
        for f in job_dir.rglob(".*.tmp") if job_dir.is_dir() else ():  # a writer killed before its rename
            f.unlink(missing_ok=True)
            removed.append(f)
        for d in sorted((p for p in job_dir.glob("*") if p.is_dir()), reverse=True):
            if not any(d.iterdir()):
                d.rmdir()
    return removed
