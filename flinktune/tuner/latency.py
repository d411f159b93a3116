"""Latency against utilization, measured per shape: the highest utilization that keeps the target.

Use :class:`LatencyCurves` inside a policy that sizes by measured capacity
(``planned <= utilization x capacity``, :mod:`flinktune.tuner.capacity`). Capacity alone says
whether a size keeps up, not how slow it is while doing so: records queue longer the busier the
slots are, so a size that keeps up at 65 % may still run over the job's latency target. Every
steady window of the running shape gives one point (utilization = input rate / measured capacity,
the window's p95 latency); per shape, :meth:`LatencyCurves.cap` fits

    latency = base + slope x u / (1 - u)

(the mean-wait form of queueing theory, Kingman's approximation: waiting grows with u / (1 - u)),
by least squares with ``slope >= 0``, and returns the highest utilization whose fitted latency
stays under ``margin x target``. Without enough points, or without enough spread in utilization
to see the slope, there is no cap: the policy's configured utilization stands. Shapes differ in
their fixed latency (slots per TaskManager, network hops), so points are never pooled across
shapes.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

import numpy as np

from flinktune.decision import JobState
from flinktune.tuner.capacity import Shape, shape_from_json, shape_of

__all__ = ["LatencyCap", "LatencyCurves"]


@dataclass(frozen=True)
class LatencyCap:
    """The fitted cap of one shape: ``utilization`` (None: no cap) and why, in words."""

    utilization: float | None
    reason: str


@dataclass
class LatencyCurves:
    """(utilization, p95 latency ms) points per shape and the utilization cap they imply.

    ``min_points`` and ``min_spread`` (of utilization) are what a fit needs; ``floor`` is the
    lowest cap returned (below it a shape's fixed latency, not its load, misses the target, and
    sizing cannot fix that); ``keep`` points per shape, newest last.
    """

    min_points: int = 4
    min_spread: float = 0.1
    floor: float = 0.3
    keep: int = 96
    points: dict[Shape, deque] = field(default_factory=dict)

    def observe(self, shape: Shape, utilization: float, latency_ms: float) -> None:
        """One steady window of ``shape``: its utilization (0-1) and p95 latency (ms); others are ignored."""
        if not (np.isfinite(utilization) and np.isfinite(latency_ms)) or not 0.0 < utilization < 1.0 or latency_ms <= 0:
            return
        self.points.setdefault(shape, deque(maxlen=self.keep)).append((float(utilization), float(latency_ms)))

    def observe_window(self, state: JobState, capacity: float | None, since_change_s: float) -> None:
        """Record a decision window of the running job when it is steady: running, no failure, no
        backlog over 2 s of input, a measured ``capacity`` (job input rec/s) and no change within the
        window (``since_change_s`` > its length: a restart's catch-up is not the shape's latency)."""
        lag_s = state.lag / state.input_rate if state.input_rate > 0 and np.isfinite(state.lag) else np.inf
        steady = state.restarts == 0 and state.running and lag_s <= 2.0 and since_change_s > state.window_s
        if capacity is not None and steady:
            self.observe(shape_of(state.config), state.input_rate / capacity, state.latency_p95_ms)

    def cap(self, shape: Shape, target_ms: float, margin: float) -> LatencyCap:
        """The highest utilization of ``shape`` whose fitted p95 stays under ``margin x target_ms``."""
        pts = np.array(self.points.get(shape, ()), dtype=float).reshape(-1, 2)
        if len(pts) < self.min_points:
            return LatencyCap(None, f"{len(pts)} steady window(s) measured on this shape, {self.min_points} needed")
        u, lat = pts[:, 0], pts[:, 1]
        if u.max() - u.min() < self.min_spread:
            return LatencyCap(None, f"utilization seen only between {u.min():.0%} and {u.max():.0%}")
        x = u / (1.0 - u)
        slope, base = np.polyfit(x, lat, 1)
        if slope <= 1e-6 * float(lat.mean()):  # latency does not rise with load in what was seen: nothing to cap by
            return LatencyCap(None, f"p95 latency did not rise with utilization ({u.min():.0%}-{u.max():.0%})")
        limit = margin * target_ms
        room = (limit - base) / slope
        fitted = f"p95 ~ {base:,.0f} ms + {slope:,.0f} ms x u/(1-u) over {len(pts)} windows at {u.min():.0%}-{u.max():.0%}"
        if room <= 0:
            return LatencyCap(self.floor, f"{fitted}: over {limit:,.0f} ms even idle, so utilization {self.floor:.0%}")
        return LatencyCap(max(self.floor, room / (1.0 + room)), f"{fitted}; {limit:,.0f} ms ({margin:.0%} of the target)")

    def to_dict(self) -> list:
        """The points as JSON: ``[{"shape": [...], "points": [[u, ms], ...]}, ...]``; see :meth:`restore`."""
        return [{"shape": list(s), "points": [list(p) for p in pts]} for s, pts in self.points.items() if pts]

    def restore(self, entries: list) -> LatencyCurves:
        """Take back :meth:`to_dict`'s points (this object's settings stay)."""
        for entry in entries:
            shape = shape_from_json(entry["shape"])
            self.points[shape] = deque(((float(u), float(ms)) for u, ms in entry["points"]), maxlen=self.keep)
        return self
