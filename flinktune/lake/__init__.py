"""The metric lake as a package: raw samples, curated features, profiling observations, quarantine.

- :class:`Lake` (:mod:`.root`): every path into the lake, and the datasets' reads and writes;
- :mod:`.atomic`: the one atomic writer every lake file goes through;
- :mod:`.snapshot`: the pointer that switches a job's curated datasets in one step;
- :class:`LakeMetricsSource` (:mod:`.source`): the decision loop's metrics source over raw samples.
"""

from flinktune.lake.atomic import atomic_parquet, atomic_write, atomic_write_with
from flinktune.lake.root import PROFILING_OBSERVATIONS, Lake
from flinktune.lake.snapshot import SnapshotError, commit_snapshot, read_snapshot, snapshot_files
from flinktune.lake.source import LakeMetricsSource

__all__ = [
    "PROFILING_OBSERVATIONS",
    "Lake",
    "LakeMetricsSource",
    "SnapshotError",
    "atomic_parquet",
    "atomic_write",
    "atomic_write_with",
    "commit_snapshot",
    "read_snapshot",
    "snapshot_files",
]
