"""Profiling observations checked against physics before a calibration fits them.

Use :func:`screen_observations` on a profiling table (``twin calibrate``, the fidelity benchmark):
a row that cannot be a measurement (no input rate, throughput above what the input and a drained
backlog allow, a latency below :data:`MIN_LATENCY_MS` (seconds written as milliseconds), a
negative recovery time, an exact duplicate) is dropped with one line naming the row and the rule;
``strict`` refuses the file instead. A file where more than :data:`MAX_DROPPED_SHARE` of the rows
fail, or with fewer than :data:`MIN_CONFIGURATIONS` distinct configurations left, is refused:
there is nothing sound to fit. A ``recovery_s`` column empty in every row is a note, not a score.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from flinktune.config_space import KNOBS

__all__ = [
    "DRAIN_SHARE",
    "MAX_DROPPED_SHARE",
    "MIN_CONFIGURATIONS",
    "MIN_LATENCY_MS",
    "ObservationError",
    "Screened",
    "screen_observations",
]

#: Throughput may exceed the input rate by this share while a backlog drains (a run's catch-up; Demeter's
#: real ADS runs reach 2.6 x their input rate right after a start).
DRAIN_SHARE = 2.0
#: A p95 end-to-end latency below this is a unit error (seconds stored as milliseconds).
MIN_LATENCY_MS = 1.0
#: More failing rows than this share: the file is refused, not thinned.
MAX_DROPPED_SHARE = 0.25
#: Fewer distinct configurations than this: too few to fit the twin's parameters.
MIN_CONFIGURATIONS = 3


class ObservationError(ValueError):
    """A profiling file that cannot be calibrated on (the message names the file and the rule)."""


@dataclass
class Screened:
    """The rows kept, one line per dropped row, and notes on the file as a whole."""

    rows: pd.DataFrame
    dropped: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def _row_problem(r: pd.Series) -> str | None:
    rate = float(r["input_rate"])
    if not rate > 0:
        return f"input_rate {rate:g} rec/s (a gap in the rate reading: nothing to fit)"
    if "throughput" in r and pd.notna(r["throughput"]):
        thr = float(r["throughput"])
        drain = float(r["backlog_drained"]) if "backlog_drained" in r and pd.notna(r.get("backlog_drained")) else 0.0
        if thr > rate * (1 + DRAIN_SHARE) + drain:
            return f"throughput {thr:g} rec/s above input_rate {rate:g} rec/s plus a drained backlog ({DRAIN_SHARE:.0%})"
        if thr < 0:
            return f"throughput {thr:g} rec/s is negative"
    if "latency_ms" in r and pd.notna(r["latency_ms"]) and float(r["latency_ms"]) < MIN_LATENCY_MS:
        ms = float(r["latency_ms"])
        return f"latency_ms {ms:g} below {MIN_LATENCY_MS:g} ms; seconds written as milliseconds? ({ms * 1000:g} ms)"
    if "recovery_s" in r and pd.notna(r["recovery_s"]) and float(r["recovery_s"]) < 0:
        return f"recovery_s {float(r['recovery_s']):g} is negative"
    return None


def screen_observations(df: pd.DataFrame, where: str, *, strict: bool = False) -> Screened:
    """The rows of ``df`` (a profiling table read from ``where``) that can be measurements.

    Raises :class:`ObservationError` when ``strict`` and any row fails, when more than
    :data:`MAX_DROPPED_SHARE` of the rows fail, or when fewer than :data:`MIN_CONFIGURATIONS`
    distinct configurations are left. Row numbers are 0-based data rows, as the file's other errors count them."""
    numeric = df.copy()
    for col in ("input_rate", "throughput", "latency_ms", "recovery_s"):
        if col in numeric:
            numeric[col] = pd.to_numeric(numeric[col], errors="coerce")
            text = numeric[col].isna() & df[col].notna()
            if text.any():  # a word where a measurement belongs: the file is wrong, not one row
                i = int(np.flatnonzero(text.to_numpy())[0])
                raise ObservationError(f"{where}: row {i}: {col} {df[col].iloc[i]!r} is not a number")
    dropped: list[str] = []
    keep = np.ones(len(df), dtype=bool)
    for i, (_, r) in enumerate(numeric.iterrows()):
        problem = _row_problem(r)
        if problem:
            dropped.append(f"{where}: row {i} dropped: {problem}")
            keep[i] = False
    dup = df.duplicated(keep="first").to_numpy() & keep
    for d in np.flatnonzero(dup):
        dropped.append(f"{where}: row {int(d)} dropped: an exact duplicate of an earlier row (counted once)")
    keep &= ~dup
    if dropped and strict:
        raise ObservationError(f"{dropped[0]} (--strict: the file is refused; {len(dropped)} row(s) fail)")
    if len(df) and (~keep).sum() > MAX_DROPPED_SHARE * len(df):
        raise ObservationError(
            f"{where}: {(~keep).sum()} of {len(df)} rows fail the physical checks (more than {MAX_DROPPED_SHARE:.0%}); "
            f"first: {dropped[0].split(': ', 1)[1]}"
        )
    rows = df[keep].reset_index(drop=True)
    knobs = [k for k in KNOBS if k in rows]
    distinct = len(rows[knobs].drop_duplicates()) if knobs else 0
    if distinct < MIN_CONFIGURATIONS:
        raise ObservationError(
            f"{where}: {distinct} distinct configuration(s) left; at least {MIN_CONFIGURATIONS} are needed to fit the twin"
        )
    notes = []
    if "recovery_s" in numeric and numeric["recovery_s"][keep].isna().all():
        notes.append(f"{where}: recovery_s is empty in every row: recovery is not calibrated (no recovery score)")
    return Screened(rows, dropped, notes)
