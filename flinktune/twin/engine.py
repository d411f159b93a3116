"""The twin's per-second dynamics: lag, checkpoints, failures, restarts and downtime.

:class:`Dynamics` is the complete mutable state of a running job (plain numbers, JSON-friendly
through :meth:`Dynamics.to_dict`) and :meth:`Dynamics.advance` moves it forward one second per
input-rate value. Everything that does not feed back into the state (latency, CPU, metrics) is
computed afterwards, vectorised, by :mod:`flinktune.twin.simulator`; keeping this loop to scalar
arithmetic is what makes 18 h at 1 s run in well under a second.

Semantics per second ``t`` (all records are job input records):
- the job runs for the part of the second after ``down_until``; a checkpoint is triggered every
  ``interval`` seconds after a (re)start, records its source offset at the barrier, completes
  after its duration and pauses the threads for its synchronous phase;
- throughput = min(effective capacity, input + lag); lag integrates input - throughput;
- a failure (scheduled, injected or drawn) strikes at the start of its second: it rewinds the
  source offset to the last completed checkpoint (the replayed records become lag again) and
  stops the job for the failure downtime;
  after any restart, capacity ramps up over the warm-up;
- in reactive mode (``rejoin_s`` > 0) the lost TaskManager registers again ``rejoin_s`` after the
  fault and the job restarts a second time, from its last completed checkpoint, at full
  parallelism (unless it is still down from the first restart, which then takes it in).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field, fields
from typing import Any

import numpy as np

__all__ = ["Dynamics", "StepInputs", "StepOutputs"]


@dataclass
class StepInputs:
    """Per-second arrays for one advance (all of length n) and the configuration's scalars."""

    rates: np.ndarray
    capacity: np.ndarray
    ckpt_duration_s: np.ndarray
    ckpt_pause_s: np.ndarray
    ckpt_size_mb: np.ndarray
    failure_downtime_s: np.ndarray
    random_failure: np.ndarray
    interval_s: int
    async_overhead: float
    warmup_s: float
    warmup_initial: float
    lead_s: int
    #: Reactive mode: seconds from a fault until the lost TaskManager registers again and the job
    #: restarts a second time (0: no second restart) ...
    rejoin_s: float = 0.0
    #: ... and the downtime of that restart (no failure detection: the JobManager sees it register).
    rejoin_downtime_s: np.ndarray | None = None


@dataclass
class StepOutputs:
    """Per-second results of one advance."""

    throughput: np.ndarray
    lag: np.ndarray
    effective_capacity: np.ndarray
    running: np.ndarray
    down_remaining_s: np.ndarray
    pause_s: np.ndarray
    restarts: np.ndarray
    ckpt_duration_ms: np.ndarray
    ckpt_size_bytes: np.ndarray


@dataclass
class Dynamics:
    """Scalar state of the simulated job. Times are epoch seconds."""

    t: int
    lag: float = 0.0
    consumed: float = 0.0
    ckpt_offset: float = 0.0
    ckpt_next: int = 0
    inflight: list[float] | None = None  # [done_t, offset, duration_ms, size_bytes]
    last_ckpt_duration_ms: float = 0.0
    last_ckpt_size_bytes: float = 0.0
    down_until: float = -1e18
    started_at: float = -1e18
    restarts: int = 0
    fail_period_s: int | None = None
    fail_nominal_next: int | None = None
    fail_at: list[int] = field(default_factory=list)
    rejoin_at: list[float] = field(default_factory=list)
    warmup_len: float | None = None  # this start's warm-up, s; None: StepInputs.warmup_s

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Dynamics:
        names = {f.name for f in fields(cls)}
        unknown = sorted(set(d) - names)
        if unknown:
            raise ValueError(f"twin dynamics state: unknown key(s) {unknown}")
        return cls(**d)

    def arm_time(self, t: int, interval: int, lead: int) -> int:
        """First 'lead seconds before a checkpoint is due' moment at or after ``t``."""
        lead = min(lead, interval - 1) if interval > 1 else 0
        cand = self.ckpt_next - lead
        if cand < t:
            cand += interval * math.ceil((t - cand) / interval)
        return int(cand)

    def restart(self, at: float, interval: int, warmup_s: float | None = None) -> None:
        """The job (re)starts at ``at``: fresh checkpoint timer, nothing in flight, warm-up from ``at``
        (``warmup_s`` long; None: the step inputs' warm-up)."""
        self.down_until = at
        self.warmup_len = warmup_s
        self.started_at = at
        self.inflight = None
        self.ckpt_next = int(math.ceil(at)) + interval

    def advance(self, x: StepInputs) -> StepOutputs:
        """Simulate ``len(x.rates)`` seconds starting at ``self.t``."""
        n = len(x.rates)
        rates, cap = x.rates.tolist(), x.capacity.tolist()
        dur, pause, size = x.ckpt_duration_s.tolist(), x.ckpt_pause_s.tolist(), x.ckpt_size_mb.tolist()
        fdown, rand_fail = x.failure_downtime_s.tolist(), x.random_failure.tolist()
        rdown = x.rejoin_downtime_s.tolist() if x.rejoin_downtime_s is not None else fdown
        interval, lead = int(x.interval_s), int(x.lead_s)
        o_thr, o_lag, o_cap, o_run = [0.0] * n, [0.0] * n, [0.0] * n, [0.0] * n
        o_down, o_pause, o_rest, o_cdur, o_csize = [0.0] * n, [0.0] * n, [0] * n, [0.0] * n, [0.0] * n
        lag, consumed, offset = self.lag, self.consumed, self.ckpt_offset
        fail_at = sorted(self.fail_at)
        t0 = self.t
        for i in range(n):
            t = t0 + i
            r = rates[i]
            if self.fail_nominal_next is not None and t >= self.fail_nominal_next:
                fail_at.append(self.arm_time(t, interval, lead))
                fail_at.sort()
                self.fail_nominal_next += self.fail_period_s or 0
            avail = t + 1 - self.down_until
            ps = 0.0
            fail = False
            if avail > 0.0:
                # A failure armed for a moment the job was down moves to the next checkpoint.
                while fail_at and fail_at[0] < t:
                    fail_at.pop(0)
                    fail_at.append(self.arm_time(t, interval, lead))
                    fail_at.sort()
                fail = rand_fail[i]
                while fail_at and fail_at[0] == t:
                    fail_at.pop(0)
                    fail = True
                if fail:
                    # The fault strikes at the start of second t: rewind to the last completed checkpoint.
                    self.restarts += 1
                    lag += consumed - offset
                    consumed = offset
                    self.restart(t + fdown[i], interval)
                    avail = t + 1 - self.down_until
                    if x.rejoin_s > 0:
                        self.rejoin_at = [*self.rejoin_at, t + x.rejoin_s]
                elif self.rejoin_at and self.rejoin_at[0] <= t:
                    # Reactive mode: the TaskManager is back, so the job rescales up: a second restart
                    # from the last completed checkpoint (the records since then are replayed).
                    self.rejoin_at = self.rejoin_at[1:]
                    lag += consumed - offset
                    consumed = offset
                    self.restart(t + rdown[i], interval)
                    avail = t + 1 - self.down_until
            elif self.rejoin_at and self.rejoin_at[0] <= t:
                self.rejoin_at = self.rejoin_at[1:]  # back while the job is still down: the first restart takes it in
            if avail <= 0.0:
                thr = 0.0
                lag += r
                running = 0.0
            else:
                running = 1.0
                if avail > 1.0:
                    avail = 1.0
                if t >= self.ckpt_next:
                    ps = pause[i]
                    self.inflight = [t + dur[i], consumed, dur[i] * 1000.0, size[i] * 1e6]
                    self.ckpt_next = t + interval
                f = avail
                infl = self.inflight
                if infl is not None:
                    if t >= infl[0]:
                        offset = infl[1]
                        self.last_ckpt_duration_ms, self.last_ckpt_size_bytes = infl[2], infl[3]
                        self.inflight = None
                    else:
                        f *= 1.0 - x.async_overhead
                age = t - self.started_at
                warm = x.warmup_s if self.warmup_len is None else self.warmup_len
                if warm > 0.0 and age < warm:  # age < 0 in the restart's first, partial second
                    f *= x.warmup_initial + (1.0 - x.warmup_initial) * age / warm
                f -= ps
                ce = cap[i] * f if f > 0.0 else 0.0
                backlog = r + lag
                thr = backlog if backlog < ce else ce
                lag = backlog - thr
                consumed += thr
                o_cap[i] = ce
            o_thr[i], o_lag[i], o_run[i], o_pause[i] = thr, lag, running, ps
            o_down[i] = max(0.0, self.down_until - (t + 1))
            o_rest[i] = self.restarts
            o_cdur[i], o_csize[i] = self.last_ckpt_duration_ms, self.last_ckpt_size_bytes
        self.lag, self.consumed, self.ckpt_offset = lag, consumed, offset
        self.fail_at = fail_at
        self.t = t0 + n
        return StepOutputs(
            throughput=np.array(o_thr),
            lag=np.array(o_lag),
            effective_capacity=np.array(o_cap),
            running=np.array(o_run),
            down_remaining_s=np.array(o_down),
            pause_s=np.array(o_pause),
            restarts=np.array(o_rest, dtype=float),
            ckpt_duration_ms=np.array(o_cdur),
            ckpt_size_bytes=np.array(o_csize),
        )
