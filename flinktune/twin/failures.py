"""Failure schedules for the twin: none, periodic (timed just before a checkpoint) or random.

Use :func:`parse_failures` on the user-facing spec strings:

- ``"none"``: no injected failures (memory-pressure failures can still happen);
- ``"every:45m"`` (also ``s``/``h`` units): one failure per period, each moved to ``failure_lead_s``
  seconds before the next checkpoint is due, so the job replays a whole checkpoint interval
  (Demeter's protocol: a 30 s network fault on one TaskManager every 45 minutes);
- ``"random:2/h"``: Poisson failures at that rate, drawn from the twin's seeded counter stream.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["FailureSchedule", "parse_failures"]

_UNITS = {"s": 1.0, "m": 60.0, "h": 3600.0}


@dataclass(frozen=True)
class FailureSchedule:
    """A parsed schedule: ``period_s`` for periodic, ``rate_per_s`` for random; ``spec`` as given."""

    spec: str
    period_s: int | None = None
    rate_per_s: float = 0.0


def parse_failures(spec: str | None) -> FailureSchedule:
    """Parse a failure spec; a bad one raises ``ValueError`` naming it and the accepted forms."""
    text = (spec or "none").strip().lower()
    if text == "none":
        return FailureSchedule("none")
    m = re.fullmatch(r"every:(\d+(?:\.\d+)?)([smh])", text)
    if m:
        period = int(round(float(m.group(1)) * _UNITS[m.group(2)]))
        if period < 1:
            raise ValueError(f"failure schedule {spec!r}: the period must be at least 1 s")
        return FailureSchedule(text, period_s=period)
    m = re.fullmatch(r"random:(\d+(?:\.\d+)?)/([smh])", text)
    if m:
        return FailureSchedule(text, rate_per_s=float(m.group(1)) / _UNITS[m.group(2)])
    raise ValueError(f"failure schedule {spec!r} not understood; use 'none', 'every:<n>[s|m|h]' or 'random:<n>/[s|m|h]'")
