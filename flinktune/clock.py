"""Injected clocks: every stage asks a :class:`Clock` for the time, never the system directly.

Use :class:`SystemClock` in production and :class:`ManualClock` in tests and in the twin, where
simulated time moves only when the simulation advances it.
"""

from __future__ import annotations

import time
from typing import Protocol

__all__ = ["Clock", "ManualClock", "SystemClock"]


class Clock(Protocol):
    """Epoch time in seconds."""

    def now(self) -> float: ...


class SystemClock:
    """Wall-clock time."""

    def now(self) -> float:
        return time.time()


class ManualClock:
    """A clock that moves only when told to (tests, the twin)."""

    def __init__(self, start: float = 0.0) -> None:
        self._t = float(start)

    def now(self) -> float:
        return self._t

    def advance(self, seconds: float) -> float:
        if seconds < 0:
            raise ValueError(f"cannot move a clock backwards by {seconds} s")
        self._t += seconds
        return self._t

    def set(self, t: float) -> None:
        if t < self._t:
            raise ValueError(f"cannot move a clock backwards from {self._t} to {t}")
        self._t = float(t)
