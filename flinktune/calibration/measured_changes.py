"""Count a measured method's configuration changes from its per-minute files, where its summary has none.

Use :func:`count_changes_on_folder` to compare a replayed method's reconfigurations with what the same
method did for real when the folder's summary (``summary_per_run.csv`` column ``n_reconfigs``) leaves
them out, as demeter-ads does for the operator autoscaler and reactive mode; :func:`count_changes` does
one run's frame (columns :data:`CHANGE_COLUMNS`, one row a minute, in time order).

What is counted: a change stops or resizes the job's TaskManagers, so the minute it happens in averages
two counts (a fractional ``task_managers`` or ``task_slots``) or shows a new count. One change is one
stretch of such minutes: a savepoint upgrade whose TaskManagers come back to the same count is still a
stretch of fractional minutes, so the operator's changes of vertex parallelism alone (its TaskManagers
follow the largest vertex) are counted too. A stretch starting within ``before_s`` .. ``after_s`` of an
injected failure is that failure's restart, not a change (the injections of
``results_recovery_per_injection.csv``). Two changes in one stretch count once, so the count is a lower
bound where changes follow each other within a minute. [inferred]

Checked against the published counts where the folder has them: Demeter's three ADS runs count 40 / 42 /
58 against the published 41 / 43 / 60, and the static run 0 (its 23 stretches are all at injections);
:func:`count_changes_on_folder` reports that check beside every count it makes.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from flinktune.calibration.cpu import read_measured_columns

__all__ = ["CHANGE_COLUMNS", "MeasuredChanges", "count_changes", "count_changes_on_folder"]

#: Columns a per-minute file needs (demeter-ads ``measured_60s`` format).
CHANGE_COLUMNS: tuple[str, ...] = ("timestamp", "task_managers", "task_slots")
#: A stretch starting this long before an injection, or this long after it, is the failure's restart, s.
BEFORE_S, AFTER_S = 120.0, 240.0
#: Counts differing by less than this are the same (the files round to three decimals).
_TOL = 1e-3


def count_changes(
    frame: pd.DataFrame, injections: Iterable[float] = (), *, before_s: float = BEFORE_S, after_s: float = AFTER_S
) -> int:
    """Configuration changes in one run's per-minute ``frame`` (see the module docstring); ``injections``:
    the run's injected failures, epoch seconds. A ``ValueError`` names missing columns or a bad window."""
    missing = [c for c in CHANGE_COLUMNS if c not in frame.columns]
    if missing:
        raise ValueError(f"measured minutes: missing column(s) {missing}; need {list(CHANGE_COLUMNS)}")
    if not (before_s >= 0 and after_s >= 0):
        raise ValueError(f"before_s and after_s must be >= 0, got {before_s!r} and {after_s!r}")
    df = frame[list(CHANGE_COLUMNS)].apply(pd.to_numeric, errors="coerce").dropna().sort_values("timestamp")
    if df.empty:
        return 0
    ts = df["timestamp"].to_numpy(float)
    event = np.zeros(len(df), dtype=bool)
    for col in ("task_managers", "task_slots"):
        x = df[col].to_numpy(float)
        event |= np.abs(x - np.round(x)) > _TOL
        event[1:] |= np.abs(np.diff(x)) > _TOL
    starts = np.flatnonzero(event & ~np.r_[False, event[:-1]])
    inj = np.asarray(list(injections), dtype=float)
    if inj.size == 0:
        return int(starts.size)
    restart = [bool(np.any((ts[s] >= inj - before_s) & (ts[s] <= inj + after_s))) for s in starts]
    return int(starts.size - sum(restart))


@dataclass(frozen=True)
class MeasuredChanges:
    """Per-run counts of one method (``counts``: run name -> changes; ``hours``: run name -> minutes read / 60),
    their mean, and the note saying how the counter fares on the runs whose summary publishes a count
    (``check``: run -> (counted, published))."""

    method: str
    counts: dict[str, int]
    hours: dict[str, float]
    check: dict[str, tuple[int, float]]
    note: str

    @property
    def mean(self) -> float:
        """Changes per run (NaN without runs)."""
        return float(np.mean(list(self.counts.values()))) if self.counts else float("nan")

    @property
    def per_hour(self) -> float:
        """Changes per hour over all runs (NaN without minutes)."""
        total_h = sum(self.hours.values())
        return float(sum(self.counts.values()) / total_h) if total_h > 0 else float("nan")


def _published(folder: Path) -> dict[str, float]:
    f = folder / "summary_per_run.csv"
    if not f.exists():
        return {}
    s = pd.read_csv(f)
    if not {"run", "n_reconfigs"} <= set(s.columns):
        return {}
    s = s.dropna(subset=["n_reconfigs"])
    return {str(r): float(n) for r, n in zip(s["run"], s["n_reconfigs"])}


def count_changes_on_folder(folder: str | Path, method: str) -> MeasuredChanges:
    """:func:`count_changes` for every ``measured_60s/*_<method>_*.csv`` of a demeter-ads-format ``folder``
    (its injections from ``results_recovery_per_injection.csv``, columns ``run`` and ``inj_ts``, when it has one),
    with the counter checked on every run of the folder whose ``summary_per_run.csv`` publishes ``n_reconfigs``.
    A ``ValueError`` names a method with no files, or a method name that is not a plain word."""
    if not method or not all(ch.isalnum() or ch in "-_" for ch in method):
        raise ValueError(f"method must be a plain name (letters, digits, '-', '_'), got {method!r}")
    folder = Path(folder)
    files = sorted((folder / "measured_60s").glob(f"*_{method}*.csv"))
    if not files:
        raise ValueError(f"{folder}: no per-minute files of method {method!r} (measured_60s/*_{method}*.csv)")
    inj_file = folder / "results_recovery_per_injection.csv"
    inj = pd.read_csv(inj_file) if inj_file.exists() else pd.DataFrame(columns=["run", "inj_ts"])

    def injections_of(run: str) -> pd.Series:
        return inj.loc[inj["run"].astype(str) == run, "inj_ts"].dropna()

    def count(path: Path) -> int:
        return count_changes(read_measured_columns(path, CHANGE_COLUMNS), injections_of(path.stem))

    frames = {f.stem: read_measured_columns(f, CHANGE_COLUMNS) for f in files}  # each file read once
    counts = {run: count_changes(df, injections_of(run)) for run, df in frames.items()}
    hours = {run: len(df.dropna()) / 60.0 for run, df in frames.items()}
    published = _published(folder)
    check = {
        run: (count(folder / "measured_60s" / f"{run}.csv"), n)
        for run, n in published.items()
        if (folder / "measured_60s" / f"{run}.csv").exists()
    }
    checked = ", ".join(f"{c} against {n:g}" for c, n in check.values()) if check else "no published count to check it on"
    note = (
        f"{method}: {' / '.join(str(c) for c in counts.values())} changes counted in the per-minute files "
        f"(mean {np.mean(list(counts.values())):.1f}); the counter on the runs with a published count: {checked}"
    )
    return MeasuredChanges(method, counts, hours, check, note)
