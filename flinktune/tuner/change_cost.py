"""The price of a change, learned per job: minutes over the latency target a reconfiguration costs.

A change stops the job (``downtime_s``: savepoint, restart, state restore), then the new
configuration starts below full speed and ramps up over ``warmup_s`` (cold JVMs, caches) while it
drains the backlog the outage left. :func:`catch_up` plays that out for a rate, a backlog and the
new configuration's capacity and says how long latency stays over target. Each mode (in-place
rescale, savepoint redeploy) has its own downtime and warm-up, starting from a cautious prior and
refitted on every change the job has gone through (:class:`ChangeCosts`): after a change the
policy watches the minutes that follow until the job is back under target, and the fit picks the
downtime and warm-up that best explain every such episode. Use :meth:`ChangeCosts.predict` before
an optional change; the policy keeps the model in its durable memory.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

__all__ = ["DEFAULT_PRIORS", "ChangeCosts", "ChangePrice", "Episode", "ModeCost", "catch_up", "catch_up_grid"]

#: Capacity right after a (re)start, as a share of full speed; it ramps linearly to 1 over the warm-up.
INITIAL_SPEED = 0.5
_STEP_S = 10.0
_HORIZON_S = 4 * 3600.0
_DOWNTIMES = np.array([2.0, 5.0, 10.0, 20.0, 30.0, 45.0, 60.0, 90.0, 120.0, 180.0, 240.0, 360.0])
_WARMUPS = np.array([0.0, 10.0, 30.0, 60.0, 120.0, 240.0, 400.0, 600.0, 900.0, 1200.0])
#: How much the prior weighs in a fit, against one observed episode (log-space squared error).
_PRIOR_WEIGHT = 0.25


@dataclass(frozen=True)
class ChangePrice:
    """What a change is predicted to cost: seconds over target, seconds until back under it."""

    mode: str
    over_s: float
    settle_s: float
    downtime_s: float
    warmup_s: float
    learned_from: int

    @property
    def over_min(self) -> float:
        return self.over_s / 60.0

    def describe(self) -> str:
        basis = f"learned from {self.learned_from} change(s)" if self.learned_from else "prior, no change measured yet"
        over = "never back under target" if not math.isfinite(self.over_s) else f"~{self.over_min:.1f} min over target"
        return (
            f"{self.mode}: {over}, back in {self.settle_s / 60:.0f} min "
            f"(downtime {self.downtime_s:.0f} s, warm-up {self.warmup_s:.0f} s, {basis})"
        )


def catch_up(
    rate: float, backlog: float, capacity: float, headroom_s: float, downtime_s: np.ndarray | float, warmup_s: np.ndarray | float
) -> tuple[np.ndarray, np.ndarray]:
    """Seconds over target and seconds until back under it, after a change, for each (downtime, warm-up) pair.

    ``rate`` arrives (rec/s) throughout; ``backlog`` is already waiting; the new configuration
    processes ``capacity`` rec/s at full speed, :data:`INITIAL_SPEED` of it right after the start.
    Latency is over target while the backlog takes longer than ``headroom_s`` to clear (the
    target less the latency at rest) and during the downtime. ``inf`` when it never catches up.
    """
    down = np.atleast_1d(np.asarray(downtime_s, dtype=float))
    warm = np.atleast_1d(np.asarray(warmup_s, dtype=float))
    down, warm = np.broadcast_arrays(down, warm)
    if capacity <= rate or capacity <= 0:
        inf = np.full(down.shape, math.inf)
        return inf, inf
    headroom = max(headroom_s, 0.5)
    lag = np.full(down.shape, max(backlog, 0.0)) + rate * down
    over = down.copy()
    last_over = down.copy()
    t = 0.0
    while t < _HORIZON_S:
        speed = np.where(warm > 0, np.minimum(1.0, INITIAL_SPEED + (1 - INITIAL_SPEED) * t / np.maximum(warm, 1e-9)), 1.0)
        cap = capacity * speed
        lag = np.maximum(0.0, lag + (rate - cap) * _STEP_S)
        late = lag / cap > headroom
        over += np.where(late, _STEP_S, 0.0)
        last_over = np.where(late, down + t + _STEP_S, last_over)
        t += _STEP_S
        if t > float(warm.max()) and not late.any():
            break
    stuck = lag / capacity > headroom
    return np.where(stuck, math.inf, over), np.where(stuck, math.inf, last_over)


def catch_up_grid(
    utilizations: np.ndarray, headroom_s: float, downtime_s: float, warmup_s: float
) -> tuple[np.ndarray, np.ndarray]:
    """:func:`catch_up` of an outage of ``downtime_s`` at each utilization (rate / capacity) of ``utilizations``."""
    over = np.empty(len(utilizations))
    settle = np.empty(len(utilizations))
    for i, u in enumerate(utilizations):
        o, s = catch_up(float(u), 0.0, 1.0, headroom_s, downtime_s, warmup_s)
        over[i], settle[i] = o[0], s[0]
    return over, settle


@dataclass(frozen=True)
class Episode:
    """One observed change: what it faced (rate, backlog, the new capacity, headroom) and what it cost."""

    rate: float
    backlog: float
    capacity: float
    headroom_s: float
    over_s: float
    settle_s: float

    def to_list(self) -> list[float]:
        return [self.rate, self.backlog, self.capacity, self.headroom_s, self.over_s, self.settle_s]


@dataclass
class ModeCost:
    """Downtime and warm-up of one change mode: the prior and the episodes it is refitted on."""

    prior_downtime_s: float
    prior_warmup_s: float
    episodes: list[Episode] = field(default_factory=list)
    downtime_s: float = -1.0
    warmup_s: float = -1.0

    def __post_init__(self) -> None:
        if self.downtime_s < 0:
            self.downtime_s, self.warmup_s = self.prior_downtime_s, self.prior_warmup_s

    def refit(self) -> None:
        """The (downtime, warm-up) on the grid that best explains the episodes, pulled toward the prior."""
        d, w = np.meshgrid(_DOWNTIMES, _WARMUPS, indexing="ij")
        d, w = d.ravel(), w.ravel()
        loss = _PRIOR_WEIGHT * (
            (np.log1p(d) - math.log1p(self.prior_downtime_s)) ** 2 + (np.log1p(w) - math.log1p(self.prior_warmup_s)) ** 2
        )
        for e in self.episodes:
            over, settle = catch_up(e.rate, e.backlog, e.capacity, e.headroom_s, d, w)
            over = np.where(np.isfinite(over), over, _HORIZON_S)
            settle = np.where(np.isfinite(settle), settle, _HORIZON_S)
            loss = loss + (np.log1p(over / 60) - math.log1p(e.over_s / 60)) ** 2
            loss = loss + 0.5 * (np.log1p(settle / 60) - math.log1p(e.settle_s / 60)) ** 2
        best = int(np.argmin(loss))
        self.downtime_s, self.warmup_s = float(d[best]), float(w[best])

    def to_dict(self) -> dict[str, Any]:
        return {
            "prior": [self.prior_downtime_s, self.prior_warmup_s],
            "fit": [self.downtime_s, self.warmup_s],
            "episodes": [e.to_list() for e in self.episodes],
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> ModeCost:
        m = cls(float(d["prior"][0]), float(d["prior"][1]), [Episode(*map(float, e)) for e in d.get("episodes", [])])
        m.downtime_s, m.warmup_s = float(d["fit"][0]), float(d["fit"][1])
        return m


#: Cautious priors (downtime s, warm-up s) before a job's first change of each mode: a savepoint
#: redeploy starts new pods (cold JVMs), an in-place rescale keeps them. Replaced as changes are seen.
DEFAULT_PRIORS: dict[str, tuple[float, float]] = {"rescale": (20.0, 60.0), "redeploy": (90.0, 300.0)}


@dataclass
class _Watch:
    """A change being watched until the job is back under target."""

    ts: float
    mode: str
    rate: float
    backlog: float
    headroom_s: float
    over: set[float] = field(default_factory=set)
    settled_at: float | None = None


@dataclass
class ChangeCosts:
    """Per mode, what a change costs this job; watches each change it is told of and refits on it."""

    modes: dict[str, ModeCost] = field(default_factory=lambda: {m: ModeCost(*prior) for m, prior in DEFAULT_PRIORS.items()})
    max_episodes: int = 12
    watch_s: float = 3 * 3600.0
    _watch: _Watch | None = None

    def predict(self, mode: str, rate: float, backlog: float, capacity: float, headroom_s: float) -> ChangePrice:
        m = self.modes[mode]
        over, settle = catch_up(rate, backlog, capacity, headroom_s, m.downtime_s, m.warmup_s)
        return ChangePrice(mode, float(over[0]), float(settle[0]), m.downtime_s, m.warmup_s, len(m.episodes))

    def started(self, ts: float, mode: str, rate: float, backlog: float, headroom_s: float) -> None:
        """A change of ``mode`` was decided at ``ts``: watch what it costs (a previous watch ends here)."""
        self._watch = _Watch(ts, mode, rate, backlog, headroom_s)

    @property
    def watching(self) -> bool:
        return self._watch is not None

    def abandon(self) -> None:
        """Stop watching (the change did not run, or a failure muddles what it cost)."""
        self._watch = None

    def observe(
        self, ts: float, minutes: tuple[tuple[float, float], ...], target_ms: float, capacity: float | None
    ) -> Episode | None:
        """Feed a decision's per-minute p95; when the watched change is back under target (two calm
        minutes after it) or has been watched ``watch_s``, record its episode and refit. ``capacity``
        is what the new configuration was measured to carry (None: not yet known, keep watching)."""
        w = self._watch
        if w is None:
            return None
        calm_since = None
        for t, p95 in minutes:
            if t + 60 <= w.ts:
                continue
            if p95 > target_ms:
                w.over.add(t)
                calm_since = None
            elif calm_since is None:
                calm_since = t
        last_over = max(w.over) + 60 if w.over else w.ts
        settled = calm_since is not None and ts - calm_since >= 120 and ts - w.ts >= 180
        timed_out = ts - w.ts >= self.watch_s
        if not (settled or timed_out) or capacity is None or capacity <= 0:
            return None
        episode = Episode(w.rate, w.backlog, capacity, w.headroom_s, 60.0 * len(w.over), max(last_over - w.ts, 0.0))
        mode = self.modes[w.mode]
        mode.episodes = ([*mode.episodes, episode])[-self.max_episodes :]
        mode.refit()
        self._watch = None
        return episode

    def to_dict(self) -> dict[str, Any]:
        w = self._watch
        return {
            "modes": {k: m.to_dict() for k, m in self.modes.items()},
            "watch": None if w is None else [w.ts, w.mode, w.rate, w.backlog, w.headroom_s, sorted(w.over)],
        }

    def restore(self, d: dict[str, Any]) -> ChangeCosts:
        for k, m in d.get("modes", {}).items():
            self.modes[k] = ModeCost.from_dict(m)
        w = d.get("watch")
        self._watch = (
            None if w is None else _Watch(float(w[0]), str(w[1]), float(w[2]), float(w[3]), float(w[4]), set(map(float, w[5])))
        )
        return self
