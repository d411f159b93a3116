"""An SLO with an error budget: minutes over the latency target the job may spend per day.

The latency goal is p95 <= target, minute by minute, with a budget of minutes over it per rolling
window (by default 1 % of a day, SRE practice: an SLO that is never missed is tuned too tight to
save anything). The policy spends the budget on changes (each costs minutes of catch-up, see
:mod:`flinktune.tuner.change_cost`), says in every reason what is left, and turns conservative as it
runs out. A job failure's own downtime (its first minutes over target) is not charged: it hits every
configuration alike. The catch-up after it is, since the headroom the policy leaves decides how long it takes.
The budget is earned as the job is watched, at the SLO's rate (1 % of the minutes by default), from a
head start (``head_start_s`` of watching, as if the job had been clean that long before; a whole
window by default): with a head start of a few hours, a policy met this morning may not spend a whole
day's budget by noon. Use :class:`ErrorBudget` from a policy; it
lives in the policy's durable memory.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = ["ErrorBudget"]


@dataclass
class ErrorBudget:
    """Minutes over target charged in the last ``window_s``, against ``minutes`` allowed."""

    minutes: float = 14.4
    window_s: float = 86400.0
    #: Watching time credited at the start (s): the budget earned before the first decision (a whole
    #: window by default: the window's budget at once).
    head_start_s: float = 86400.0
    #: When watching began (s; None: not yet).
    started: float | None = None
    #: Start (s) of each charged minute over target within the window.
    charged: set[float] = field(default_factory=set)
    #: Minutes (start, s) already looked at, so an overlapping window is not counted twice.
    seen_until: float = float("-inf")

    def observe(
        self,
        ts: float,
        minutes: tuple[tuple[float, float], ...],
        target_ms: float,
        *,
        failure_window_start: float | None,
        watching: bool,
        failure_minutes: int = 1,
    ) -> None:
        """Charge the new minutes over ``target_ms`` of one decision's window. ``failure_window_start``:
        the window held a job failure; its first ``failure_minutes`` minutes over target are its
        downtime, which no configuration saves, and are not charged (the catch-up after them is)."""
        if self.started is None:
            self.started = min((t for t, _ in minutes), default=ts)
        excuse = failure_minutes if failure_window_start is not None and not watching else 0
        for t, p95 in minutes:
            if t <= self.seen_until or t + 60 > ts + 1e-9:  # counted already, or not a whole minute yet
                continue
            if p95 > target_ms:
                if excuse > 0 and failure_window_start is not None and t + 60 > failure_window_start:
                    excuse -= 1
                else:
                    self.charged.add(t)
            self.seen_until = max(self.seen_until, t)
        self.charged = {t for t in self.charged if t > ts - self.window_s}

    def spent(self) -> float:
        return float(len(self.charged))

    def earned(self, now: float | None = None) -> float:
        """Minutes over target allowed in the window so far: ``minutes`` once a whole window was watched
        (head start included), that share of it before. ``now`` defaults to the last minute seen."""
        if self.started is None:
            return self.minutes * min(1.0, self.head_start_s / self.window_s)
        at = self.seen_until + 60.0 if now is None else now
        watched = max(at - self.started, 0.0) + self.head_start_s
        return self.minutes * min(1.0, watched / self.window_s)

    def left(self) -> float:
        return max(self.earned() - self.spent(), 0.0)

    @property
    def share_left(self) -> float:
        earned = self.earned()
        return self.left() / earned if earned > 0 else 0.0

    def describe(self) -> str:
        earned = self.earned()
        of = f"{earned:.1f}" if earned < self.minutes else f"{self.minutes:g}"
        return (
            f"error budget {self.left():.1f} of {of} min over target left"
            f" ({self.minutes:g} min per {self.window_s / 3600:g} h, earned as the job is watched)"
        )

    def to_dict(self) -> dict[str, Any]:
        def finite(x: float) -> float | None:
            return x if x != float("-inf") else None

        return {
            "charged": sorted(self.charged),
            "seen_until": finite(self.seen_until),
            "started": self.started,
        }

    def restore(self, d: dict[str, Any]) -> ErrorBudget:
        self.charged = set(map(float, d.get("charged", [])))
        self.seen_until = float(d["seen_until"]) if d.get("seen_until") is not None else float("-inf")
        self.started = float(d["started"]) if d.get("started") is not None else None
        return self
