"""Capacity near saturation: summarise profiling steps, plan the next step, estimate the capacity.

Use these pure functions on recorded counter snapshots of a stepped rate ramp (the live side is
:func:`flinktune.localflink.profiling.ramp_to_saturation`). Why near saturation: the busy-time
extrapolation ``throughput / busy fraction`` measured at a low rate over-predicts on a small
shared machine (two window subtasks, the source, the JobManager and GC share 2 cores, so a
subtask's busy millisecond at 6 % load is cheaper than at 90 %); the last long run predicted
68k rec/s for p=2 where about 40k was real. The rate a job *sustains* once it falls behind is
its capacity, measured directly.

Shapes:

- a **snapshot frame** (one step) is a DataFrame with one row per poll (about 1 s apart):
  ``t_s`` (epoch s), ``records_out`` (source records emitted, a counter summed over subtasks),
  ``busy_ms`` (the busiest non-source subtask's ``accumulateBusyTimeMs``), ``backpressured_ms``
  (the most back-pressured source subtask's ``accumulateBackPressuredTimeMs``) and ``pending``
  (the sources' backlog, records). Rates are least-squares slopes over the frame, so the 0-1 s
  staleness of each REST read averages out instead of biasing a
  two-point difference;
- :class:`StepSummary`: one step (target rate -> sustained throughput, busy, back pressure,
  backlog growth, whether it saturated);
- :class:`CapacityEstimate`: one parallelism's capacity from its steps, with the busy-based
  estimate of the highest unsaturated step as a cross-check.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
import pandas as pd

__all__ = [
    "SNAPSHOT_COLUMNS",
    "CapacityEstimate",
    "StepSummary",
    "estimate_capacity",
    "least_squares_rate",
    "next_step_rate",
    "summarize_step",
]

SNAPSHOT_COLUMNS: tuple[str, ...] = ("t_s", "records_out", "busy_ms", "backpressured_ms", "pending")


@dataclass(frozen=True)
class StepSummary:
    """One profiling step: at ``target_rate`` offered, what the job sustained (rates rec/s, fractions 0-1).

    ``lag_growth`` is the backlog's growth in records/s; ``busy_capacity`` the busy-time estimate
    ``throughput / busy`` (inf when the job was not measurably busy); ``t_start`` the first poll
    (epoch s) and ``duration_s`` the span of the polls. ``latency_p95_ms`` (the median of the
    job's p95 gauge over the step),
    ``machine_cores`` and ``flink_cores`` are filled by the live side (NaN when not measured):
    machine CPU well above Flink's own means a neighbour took CPU during the step.
    """

    target_rate: float
    throughput: float
    busy: float
    backpressure: float
    lag_growth: float
    busy_capacity: float
    saturated: bool
    reason: str
    t_start: float
    duration_s: float
    latency_p95_ms: float = math.nan
    machine_cores: float = math.nan
    flink_cores: float = math.nan

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class CapacityEstimate:
    """The capacity of one parallelism (rec/s) and how it was found.

    ``method`` is ``saturation`` (the throughput a saturated step sustained, or a higher rate an
    unsaturated step held), ``near saturation`` (no step fell behind but the busiest subtask was
    at least ``near_busy`` busy: the highest sustained rate, within a few % of the limit) or
    ``lower bound`` (the ramp never got close: not ``trusted``). ``busy_capacity`` is the
    busy-time extrapolation at the highest unsaturated step (the cross-check) and
    ``busy_overestimate`` its relative error against ``capacity``.
    """

    parallelism: int
    capacity: float
    trusted: bool
    method: str
    sustained_rate: float
    saturated_throughput: float
    busy_capacity: float
    base_latency_ms: float
    steps: int
    config: dict[str, Any] = field(default_factory=dict)

    @property
    def busy_overestimate(self) -> float:
        if not (np.isfinite(self.busy_capacity) and self.capacity > 0):
            return math.nan
        return self.busy_capacity / self.capacity - 1.0

    def to_dict(self) -> dict[str, Any]:
        return dict(asdict(self), busy_overestimate=self.busy_overestimate)


def least_squares_rate(t: np.ndarray, v: np.ndarray) -> float:
    """Per-second rate of counter polls ``v`` taken at times ``t`` (s): the least-squares slope.

    Use it for counters read through Flink's REST cache: each read can be up to a second stale,
    which a slope over many polls averages out and a two-point difference does not.
    """
    tc = t - t.mean()
    return float(np.dot(tc, v - v.mean()) / np.dot(tc, tc))


def summarize_step(
    frame: pd.DataFrame, target_rate: float, *, tolerance: float = 0.05, min_span_s: float = 5.0, where: str = "profiling step"
) -> StepSummary:
    """Summarise one step's snapshot frame (see the module doc) taken while ``target_rate`` was offered.

    A step is saturated when the sources' backlog grew faster than ``tolerance`` x the target, or
    they sustained less than ``1 - 2 x tolerance`` of it: both say the job fell behind. The
    backlog is the sharper signal: counters come through a cache refreshed once a second, so a
    short step's throughput carries a few % of noise, while the backlog of a job that keeps up
    stays near zero however old the read.
    Raises ``ValueError`` naming ``where`` for a frame that cannot be read: missing columns,
    fewer than 3 polls or under ``min_span_s``, non-finite values, or a counter that went
    backwards (the job restarted during the step, so its rates mean nothing).
    """
    if not target_rate > 0:
        raise ValueError(f"{where}: target rate must be positive, got {target_rate!r}")
    missing = [c for c in SNAPSHOT_COLUMNS if c not in frame.columns]
    if missing:
        raise ValueError(f"{where}: snapshot frame lacks column(s) {missing}; expected {list(SNAPSHOT_COLUMNS)}")
    df = frame.sort_values("t_s")
    values = df[list(SNAPSHOT_COLUMNS)].to_numpy(dtype="float64")
    if not np.isfinite(values).all():
        bad = [c for i, c in enumerate(SNAPSHOT_COLUMNS) if not np.isfinite(values[:, i]).all()]
        raise ValueError(f"{where}: non-finite values in {bad}")
    t = values[:, 0]
    span = float(t[-1] - t[0]) if len(t) else 0.0
    if len(t) < 3 or span < min_span_s:
        raise ValueError(f"{where}: {len(t)} polls over {span:.1f} s; need at least 3 over {min_span_s:g} s")
    # Only records_out is a true counter. Flink derives accumulateBusyTimeMs as elapsed time minus
    # the idle and back-pressured time booked so far, and books an idle period when it ends, so
    # the busy "counter" dips by up to one idle period; the slope absorbs that.
    drops = np.flatnonzero(np.diff(values[:, 1]) < 0)
    if drops.size:
        raise ValueError(
            f"{where}: counter records_out went backwards at t={t[drops[0] + 1]:.1f}: the job restarted during the step"
        )
    throughput = max(least_squares_rate(t, values[:, 1]), 0.0)
    busy = float(np.clip(least_squares_rate(t, values[:, 2]) / 1000.0, 0.0, 1.0))
    backpressure = float(np.clip(least_squares_rate(t, values[:, 3]) / 1000.0, 0.0, 1.0))
    lag_growth = least_squares_rate(t, values[:, 4])
    busy_capacity = throughput / busy if busy >= 0.01 else math.inf
    short = throughput < (1.0 - 2.0 * tolerance) * target_rate
    growing = lag_growth > tolerance * target_rate
    if short or growing:
        reason = (
            f"fell behind: sustained {throughput:,.0f} of {target_rate:,.0f} rec/s, backlog "
            f"{'+' if lag_growth >= 0 else ''}{lag_growth:,.0f} rec/s"
        )
    else:
        reason = f"kept up: {throughput:,.0f} of {target_rate:,.0f} rec/s, busiest subtask {busy:.0%} busy"
    return StepSummary(
        float(target_rate), throughput, busy, backpressure, lag_growth, busy_capacity, short or growing, reason, float(t[0]), span
    )


def _saturated_throughput(steps: Sequence[StepSummary]) -> float:
    sat = [s.throughput for s in steps if s.saturated]
    # Several saturated steps measure the same limit; their median resists one step taken while
    # a neighbour held (or released) a core.
    return float(np.median(sat)) if sat else math.nan


def _sustained(steps: Sequence[StepSummary]) -> StepSummary | None:
    ok = [s for s in steps if not s.saturated]
    return max(ok, key=lambda s: s.throughput) if ok else None


def next_step_rate(
    steps: Sequence[StepSummary],
    *,
    growth: float = 1.25,
    max_jump: float = 3.0,
    aim: float = 0.95,
    near_busy: float = 0.9,
    confirm: float = 0.9,
    confirmed: float = 0.85,
) -> float | None:
    """The next target rate of a ramp, or None when the capacity is bracketed.

    Before any saturation: aim just under the busy-time estimate of the last step (it
    over-predicts, so the next step often saturates, which is the point), but at least
    ``growth`` and at most ``max_jump`` times the last rate; when the busiest subtask is already
    ``near_busy`` busy, one ``growth`` step pushes it over. After a saturated step: done when
    some unsaturated step held ``confirmed`` of the saturated throughput; otherwise one step at
    ``confirm`` of it checks that the job sustains that (the backlog must be cleared first, see
    ``ramp_to_saturation``), unless such a step was already run.
    """
    if not steps:
        raise ValueError("next_step_rate: a ramp starts from a measured step; none given")
    cap = _saturated_throughput(steps)
    best = _sustained(steps)
    if np.isfinite(cap):
        if best is not None and best.throughput >= confirmed * cap:
            return None
        probe = confirm * cap
        if any(abs(s.target_rate - probe) <= 0.03 * probe or (s.target_rate < probe and s.saturated) for s in steps):
            return None  # already tried at (or fell behind below) that rate: the estimate stands
        return probe
    last = steps[-1]
    if last.busy >= near_busy or not np.isfinite(last.busy_capacity):
        return last.target_rate * growth
    return float(np.clip(aim * last.busy_capacity, last.target_rate * growth, last.target_rate * max_jump))


def estimate_capacity(
    parallelism: int, steps: Sequence[StepSummary], *, near_busy: float = 0.9, config: dict[str, Any] | None = None
) -> CapacityEstimate:
    """The capacity of ``parallelism`` from its ramp's steps (see :class:`CapacityEstimate`)."""
    if not steps:
        raise ValueError(f"estimate_capacity: parallelism {parallelism} has no profiling steps")
    sat = _saturated_throughput(steps)
    best = _sustained(steps)
    sustained = best.throughput if best is not None else math.nan
    busy_cap = best.busy_capacity if best is not None else math.nan
    lowest = min(steps, key=lambda s: s.target_rate)
    base = lowest.latency_p95_ms if not lowest.saturated else math.nan
    if np.isfinite(sat):
        # A saturated step sustains the limit; an unsaturated one above it proves more.
        cap, trusted, method = max(sat, sustained if np.isfinite(sustained) else 0.0), True, "saturation"
    elif best is not None and best.busy >= near_busy:
        cap, trusted, method = sustained, True, "near saturation"
    else:
        cap, trusted, method = sustained, False, "lower bound"
    return CapacityEstimate(
        int(parallelism), float(cap), trusted, method, sustained, sat, busy_cap, base, len(steps), dict(config or {})
    )
