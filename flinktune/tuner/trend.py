"""The input rate's recent climb, so that one scale-up covers a ramp instead of several steps.

Every change costs minutes over the latency target (downtime, then the backlog's drain), so on a
steady climb (a daily ramp) three scale-ups sized for the next ten minutes each cost three times what
one sized for the next half hour does, and a load that peaked at a rate within the last day is
likely to come back to it. Use :class:`RateTrend`: :meth:`RateTrend.observe` records the input rate
at each decision, :meth:`RateTrend.ahead` says where a steady climb goes within a horizon (None when
the recent rates do not climb steadily), :meth:`RateTrend.peak` the highest rate of the last day.
Rates are rec/s, times seconds (epoch).
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

import numpy as np

__all__ = ["Climb", "RateTrend"]


@dataclass(frozen=True)
class Climb:
    """A steady climb: ``slope`` rec/s per second over ``span_s``, fitting the rates with ``r2``; ``rate`` where it leads."""

    slope: float
    span_s: float
    r2: float
    rate: float

    def describe(self, horizon_s: float) -> str:
        return (
            f"the input climbed {self.slope * 60:,.0f} rec/s per minute over the last {self.span_s / 60:.0f} min "
            f"(fit R2 {self.r2:.2f}): {self.rate:,.0f} rec/s within {horizon_s / 60:.0f} min"
        )


@dataclass
class RateTrend:
    """Input rates seen at decisions over the last ``keep_s``; a least-squares line through those of the last ``window_s``."""

    window_s: float = 2700.0
    keep_s: float = 86400.0
    #: A climb needs this many rates spanning ``min_span_s``, and a line that explains ``min_r2`` of their spread.
    min_points: int = 4
    min_span_s: float = 1200.0
    min_r2: float = 0.7
    _rates: deque = field(default_factory=deque, repr=False)

    def observe(self, now: float, rate: float) -> None:
        """Record the input ``rate`` at ``now`` (non-finite or negative rates are skipped)."""
        if np.isfinite(rate) and rate >= 0:
            self._rates.append((float(now), float(rate)))
        while self._rates and now - self._rates[0][0] > self.keep_s:
            self._rates.popleft()

    def peak(self) -> float:
        """The highest rate seen over the last ``keep_s`` (0 before any)."""
        return max((r for _, r in self._rates), default=0.0)

    def ahead(self, horizon_s: float) -> Climb | None:
        """Where the climb leads ``horizon_s`` after the newest rate, or None (too few rates, flat, falling, or noisy)."""
        if not self._rates:
            return None
        newest = self._rates[-1][0]
        recent = [(x, y) for x, y in self._rates if newest - x <= self.window_s]
        if len(recent) < self.min_points:
            return None
        t = np.array([x for x, _ in recent])
        r = np.array([y for _, y in recent])
        span = float(t[-1] - t[0])
        if span < self.min_span_s:
            return None
        tc = t - t.mean()
        slope = float((tc * (r - r.mean())).sum() / (tc * tc).sum())
        if slope <= 0:
            return None
        fitted = r.mean() + slope * tc
        total = float(((r - r.mean()) ** 2).sum())
        r2 = 1.0 - float(((r - fitted) ** 2).sum()) / total if total > 0 else 0.0
        if r2 < self.min_r2:
            return None
        return Climb(slope, span, r2, float(fitted[-1] + slope * horizon_s))

    def to_list(self) -> list[list[float]]:
        """The (time, rate) pairs held, oldest first, as JSON."""
        return [[t, r] for t, r in self._rates]

    def restore(self, rates: list[list[float]]) -> RateTrend:
        self._rates = deque((float(t), float(r)) for t, r in rates)
        return self
