"""The offered load of the benchmark job: a rate file it re-reads every 0.5 s, and rate traces.

Use :class:`RateFile` to set the total records/s (written to a temp name, then renamed, so the
job never reads half a number), :func:`rise_and_fall` for a symmetric trapezoid, and
:meth:`RatePlan.from_capacities` for the decision-loop benchmark: a rise that *requires* a
scale-up (above the smallest parallelism's measured capacity) and a fall that makes a scale-down
correct, sized from the capacities profiling measured.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from flinktune.lake.atomic import atomic_write

__all__ = ["RateFile", "RatePlan", "rise_and_fall"]


class RateFile:
    """The rate file at ``path``; ``set(rate)`` changes the offered load of a running job."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path).resolve()

    def set(self, rate: float) -> None:
        if not rate >= 0:
            raise ValueError(f"rate file {self.path}: a rate must be a non-negative number, got {rate!r}")
        atomic_write(self.path, f"{rate:.3f}\n".encode())  # the job reads it while it runs

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


@dataclass(frozen=True)
class RatePlan:
    """A piecewise-linear offered rate: ``knots`` are (seconds since start, rec/s), times increasing.

    :meth:`rate_at` interpolates between knots and holds the end values outside them.
    """

    knots: tuple[tuple[float, float], ...]
    low: float
    high: float

    def __post_init__(self) -> None:
        t = [k[0] for k in self.knots]
        if len(t) < 2 or any(b <= a for a, b in zip(t, t[1:])) or any(not r >= 0 for _, r in self.knots):
            raise ValueError(f"rate plan: knots need at least two points, increasing times and rates >= 0, got {self.knots}")

    @property
    def duration_s(self) -> float:
        return self.knots[-1][0]

    def rate_at(self, t_s: float) -> float:
        t, r = zip(*self.knots)
        return float(np.interp(t_s, t, r))

    @classmethod
    def from_capacities(
        cls,
        capacity: dict[int, float],
        duration_s: float,
        *,
        low_frac: float = 0.4,
        high_over_small: float = 1.3,
        high_under_large: float = 0.8,
        min_excess: float = 1.1,
        phases: tuple[float, float, float, float, float] = (0.07, 0.2, 0.23, 0.17, 0.33),
    ) -> RatePlan:
        """Low -> high -> low, from the measured capacities of the smallest and the largest parallelism.

        ``low`` is ``low_frac`` of the smallest parallelism's capacity (it carries it easily, so a
        scale-down there is correct); ``high`` is ``high_over_small`` times that capacity (the small
        size cannot keep up: a scale-up is required) but at most ``high_under_large`` of the
        largest's (which then holds it with room). ``phases`` are the fractions of ``duration_s``
        spent low, rising, high, falling and low again; the last low phase is the longest, since
        a scale-down waits for its dwell time and is then judged on what follows it. Raises
        ``ValueError`` when the largest parallelism is not enough above the smallest for a high
        level at least ``min_excess`` times the small capacity (no rise could require a scale-up
        that the large size then carries).
        """
        if len(capacity) < 2:
            raise ValueError(f"rate plan: needs measured capacities of two parallelisms, got {capacity}")
        if any(not c > 0 for c in capacity.values()):
            raise ValueError(f"rate plan: capacities must be positive, got {capacity}")
        if len(phases) != 5 or any(f <= 0 for f in phases) or abs(sum(phases) - 1.0) > 1e-6:
            raise ValueError(f"rate plan: phases must be 5 positive fractions summing to 1, got {phases}")
        small, large = capacity[min(capacity)], capacity[max(capacity)]
        low, high = low_frac * small, min(high_over_small * small, high_under_large * large)
        if high < min_excess * small:
            raise ValueError(
                f"rate plan: p={max(capacity)} ({large:,.0f} rec/s) is not enough above p={min(capacity)} "
                f"({small:,.0f} rec/s): a high level of {high:,.0f} rec/s is under {min_excess:g}x the small "
                "capacity, so no rise would require a scale-up that the large size then carries"
            )
        t = np.cumsum((0.0, *phases)) * duration_s
        return cls(((t[0], low), (t[1], low), (t[2], high), (t[3], high), (t[4], low), (t[5], low)), low, high)
