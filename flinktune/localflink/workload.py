"""The offered load of the benchmark job: a rate file it re-reads every 0.5 s, and rate traces.

Use :class:`RateFile` to set the total records/s (written to a temp name, then renamed, so the
job never reads half a number) and :func:`rise_and_fall` for the benchmark's trace.
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["RateFile", "rise_and_fall"]


class RateFile:
    """The rate file at ``path``; ``set(rate)`` changes the offered load of a running job."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path).resolve()

    def set(self, rate: float) -> None:
        if not rate >= 0:
            raise ValueError(f"rate file {self.path}: a rate must be a non-negative number, got {rate!r}")
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_name(self.path.name + ".tmp")
        tmp.write_text(f"{rate:.3f}\n")
        os.replace(tmp, self.path)

    def get(self) -> float:
        try:
            return float(self.path.read_text().strip())
        except (OSError, ValueError) as exc:
            raise ValueError(f"rate file {self.path}: unreadable ({exc})") from None


def rise_and_fall(t_s: float, *, low: float, high: float, duration_s: float, hold_frac: float = 0.3) -> float:
    """A trapezoid: ``low`` -> ``high`` over the first part, hold ``high``, back to ``low`` by ``duration_s``.

    The ramps take (1 - hold_frac) / 2 of the duration each; before 0 and after the end it is ``low``.
    """
    if duration_s <= 0:
        raise ValueError(f"duration_s must be positive, got {duration_s}")
    ramp = duration_s * (1 - hold_frac) / 2
    if t_s <= 0 or t_s >= duration_s:
        return low
    if t_s < ramp:
        return low + (high - low) * t_s / ramp
    if t_s <= duration_s - ramp:
        return high
    return low + (high - low) * (duration_s - t_s) / ramp
