"""Sizing within a shape, and the hysteresis that keeps the flinktune policy from flapping.

Use :func:`planned_rate` for the rate to provision for now (a forecast peak quantile, or the input
plus the lag's drain), :func:`size_in_shape` for the smallest in-shape parallelism that carries a
rate, :class:`PlanWindow` for the highest rate planned over a recent horizon (what a scale-down must
still carry) and :class:`ChangeLog` for the budget of optional changes in a sliding window. Rates
are rec/s, times seconds (epoch).
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

import numpy as np

from flinktune.config_space import ConfigSpace, Configuration
from flinktune.decision import JobState
from flinktune.decision.stages import PolicyContext
from flinktune.tuner.capacity import Shape, ShapeCapacities
from flinktune.tuner.selection import score_candidates
from flinktune.tuner.shapes import shape_configs

__all__ = ["ChangeLog", "PlanWindow", "current_demand", "planned_rate", "size_in_shape"]


def planned_rate(state: JobState, context: PolicyContext, quantile: float, catch_up_s: float) -> tuple[float, str]:
    """(rate to provision for now, why): max(forecast ``quantile`` peak, input + lag drained in ``catch_up_s``).

    A forecast without the ``quantile`` level is read at its next level above (the safe side; its
    highest when none is above), so a fallback forecaster with other levels plans alike.
    """
    fc = context.forecast
    assert fc is not None
    q = (
        quantile
        if quantile in fc.quantiles
        else min((k for k in fc.quantiles if k > quantile), default=max(fc.quantiles, default=None))
    )
    peak = fc.peak(q) if q is not None else fc.peak()
    backlog = _drain(state, catch_up_s)
    now_rate = current_demand(state, catch_up_s)
    if now_rate > peak:
        return now_rate, f"current input {state.input_rate:,.0f} rec/s + lag drain {backlog:,.0f} rec/s"
    return peak, f"forecast p{int(round((q or 0.5) * 100))} peak of the next {fc.horizon_s // 60} min"


def _drain(state: JobState, catch_up_s: float) -> float:
    # No drain in a window with a failure: that backlog is the failure's, which recovery drains anyway.
    return max(state.lag, 0.0) / catch_up_s if np.isfinite(state.lag) and state.restarts == 0 else 0.0


def current_demand(state: JobState, catch_up_s: float) -> float:
    """The rate the job must carry now, without any forecast: input + lag drained in ``catch_up_s``."""
    return (state.input_rate if np.isfinite(state.input_rate) else 0.0) + _drain(state, catch_up_s)


def size_in_shape(
    space: ConfigSpace,
    shape: Shape,
    capacities: ShapeCapacities,
    rate: float,
    utilization: float,
    context: PolicyContext,
    confidence: float,
) -> tuple[Configuration, str, bool]:
    """(smallest in-shape configuration for ``rate``, why, whether it is enough).

    Sized by capacity once there is an estimate (``rate <= utilization x capacity``): measured on
    the shape, or transferred from the shape measured last (:class:`ShapeCapacities`); before
    that by the surrogate (the prior), at P(goals) >= ``confidence``. Not enough: the shape's
    largest parallelism.
    """
    cands = shape_configs(space, shape)
    if capacities.estimate(shape, cands[-1].parallelism) is not None:
        what = "measured" if capacities.measured(shape) else "estimated"
        for c in cands:
            cap = capacities.estimate(shape, c.parallelism) or 0.0
            if rate <= utilization * cap:
                return c, f"{what} capacity {cap:,.0f} rec/s at p{c.parallelism} (utilization {rate / cap:.0%})", True
    else:
        sc = score_candidates(context.surrogate, space, rate, context.latency_target_ms, context.recovery_limit_s, cands)  # type: ignore[arg-type]  # callers pass a context with a surrogate (decide() checks it)
        ok = np.flatnonzero(sc.p_feasible >= confidence)
        if ok.size:
            return cands[int(ok[0])], f"surrogate prior ({sc.summary(int(ok[0]))})", True
    return cands[-1], "even the shape's largest parallelism is not enough", False


@dataclass
class PlanWindow:
    """The rates planned at each decision; :meth:`push` returns the highest over the last ``horizon_s``.

    A scale-down sized for that highest rate, not the current one, waits out a dip as long as the horizon.
    """

    _plans: deque = field(default_factory=deque, repr=False)

    def push(self, now: float, planned: float, horizon_s: float) -> float:
        """Record ``planned`` at ``now``; the highest rate planned in ``(now - horizon_s, now]``."""
        self._plans.append((now, planned))
        while self._plans and now - self._plans[0][0] > horizon_s:
            self._plans.popleft()
        return max(r for _, r in self._plans)

    def to_list(self) -> list[list[float]]:
        """The (time, rate) pairs held, oldest first, as JSON."""
        return [[float(t), float(r)] for t, r in self._plans]

    def restore(self, plans: list[list[float]]) -> PlanWindow:
        self._plans = deque((float(t), float(r)) for t, r in plans)
        return self


@dataclass
class ChangeLog:
    """When the policy changed the job; :meth:`over_budget` says whether an optional change must wait.

    Every change is a restart of some kind, and the service pays for each: at most ``budget``
    changes in any ``window_s``.
    """

    last: float = float("-inf")
    _counted: deque = field(default_factory=deque, repr=False)

    def to_dict(self) -> dict:
        """The last change and the changes still counted, as JSON (None: no change yet)."""
        return {"last": self.last if np.isfinite(self.last) else None, "counted": [float(t) for t in self._counted]}

    def restore(self, d: dict) -> ChangeLog:
        self.last = float(d["last"]) if d.get("last") is not None else float("-inf")
        self._counted = deque(float(t) for t in d.get("counted", []))
        return self

    def record(self, now: float) -> None:
        """A change at ``now``: it uses the budget and resets the dwell time."""
        self.last = now
        self._counted.append(now)

    def since_last(self, now: float) -> float:
        """Seconds since the last change (inf before the first)."""
        return now - self.last

    def left(self, now: float, budget: int, window_s: float) -> int:
        """Changes ``budget`` still allows at ``now`` (0 when used up)."""
        while self._counted and now - self._counted[0] >= window_s:
            self._counted.popleft()
        return max(budget - len(self._counted), 0)

    def over_budget(self, now: float, budget: int, window_s: float) -> str | None:
        """Why an optional change at ``now`` must wait (the budget is used up), or None."""
        if self.left(now, budget, window_s) > 0:
            return None
        if not self._counted:
            return f"the budget allows no optional change ({budget} per {window_s / 3600:g} h)"
        free = self._counted[0] + window_s - now
        return (
            f"{len(self._counted)} changes in the last {window_s / 3600:g} h already use the budget of "
            f"{budget}; the next optional change can come in {free / 60:.0f} min"
        )
