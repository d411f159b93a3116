"""The watch: between scheduled decisions, a cheap check that the load has outrun the running job.

Use :func:`check` every ``WatchRule.every_s`` seconds on the last ``WatchRule.window_s`` of raw
samples; when it returns an :class:`Alarm`, run the decision loop now (``DecisionLoop.step(trigger=
alarm.reason)``) instead of waiting for the next interval. A decision interval of 5-10 minutes is
what keeps a tuner cheap and stable, but a step in the load that starts just after a decision
piles up backlog for the whole interval (the demo's 06:53 ramp cost 550 s above the latency goal,
``docs/results/report-demo.md``); reacting within a minute or two is what the operator autoscaler
and DS2 get from their 60 s cadence, without deciding every minute.

The rule fires when a job that runs normally outgrows its size: the lag rose by more than
``min_backlog_s`` seconds of input over the window, or the last minute's p95 latency is over the
job's target (a job near its capacity queues records without a growing backlog, and the latency is
what the user sees); and only when the newest sample is fresh, no restart happened
in the window (a failure's backlog drains by itself, and the policy sizes for it) and the last
decision is at least ``settle_s`` old when it changed the job (a change just applied restarts the
job, which grows the lag for a while by design) or ``every_s`` old when it kept it (a scheduled
decision that kept the size a minute before a climb broke out must not hold the answer back for
three minutes: the demo's 06:55 keep did, and the climb ran two minutes longer). Everything it cannot read is "no alarm": the scheduled decision will see
and say what is wrong.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import pandas as pd

from flinktune.config_space import Configuration
from flinktune.decision.evaluation import evaluate, restarts
from flinktune.decision.loop import DecisionLoop, StepOutcome
from flinktune.decision.stages import MetricsSource, Realizer, StateStore

__all__ = [
    "WATCHED_POLICIES",
    "Alarm",
    "WatchRule",
    "check",
    "check_cluster",
    "last_decision",
    "step_if_alarmed",
    "watch_chunks",
]

#: Policies that are watched between their decisions: the ones that plan ahead at a long interval.
#: The baselines keep their published cadence (the operator autoscaler and DS2 already decide every 60 s).
WATCHED_POLICIES = frozenset({"flinktune"})

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class WatchRule:
    """When the watch looks and what makes it fire (seconds; ``min_backlog_s`` in seconds of input)."""

    every_s: int = 60
    window_s: int = 120
    min_backlog_s: float = 10.0
    settle_s: float = 180.0

    def __post_init__(self) -> None:
        if min(self.every_s, self.window_s, self.min_backlog_s) <= 0 or self.settle_s < 0:
            raise ValueError(f"watch rule: every_s, window_s and min_backlog_s must be > 0 and settle_s >= 0, got {self}")


@dataclass(frozen=True)
class Alarm:
    """Why the watch asks for a decision now, in words, with the numbers that decided."""

    reason: str
    backlog_growth: float
    input_rate: float


def check(
    job: str,
    samples: pd.DataFrame,
    config: Configuration,
    now: float,
    *,
    last_decision_ts: float | None,
    latency_target_ms: float | None = None,
    rule: WatchRule = WatchRule(),
    last_changed: bool = True,
) -> Alarm | None:
    """An :class:`Alarm` when ``job`` outgrew its size by the rule, else None. ``samples``: raw
    schema, the last ``rule.settle_s + rule.window_s`` seconds before ``now`` (rates and latency are
    read from the last ``window_s``; a restart anywhere in them means a failure's backlog is still
    draining). ``latency_target_ms``: the job's p95 target (None: the backlog rule alone);
    ``last_changed``: whether the last decision changed the job (it settles ``settle_s``, a keep ``every_s``)."""
    if last_decision_ts is not None and now - last_decision_ts < (rule.settle_s if last_changed else rule.every_s):
        return None
    recent = samples[samples["ts_ms"] >= (now - rule.window_s) * 1000] if not samples.empty else samples
    state = evaluate(job, recent, config, now, window_s=rule.window_s)
    if state.problems or not state.fresh or not state.running or restarts(samples) > 0:
        return None
    rate = state.input_rate
    growth = state.lag_growth * rule.window_s
    if not rate > 0:
        return None
    late = latency_target_ms is not None and state.latency_p95_ms > latency_target_ms
    if not (late or growth > rule.min_backlog_s * rate):
        return None
    what = (
        f"the backlog grew by {growth:,.0f} records in the last {rule.window_s} s ({state.lag_growth:,.0f} rec/s more "
        f"arrived than were processed; {growth / rate:.0f} s of the {rate:,.0f} rec/s input)"
    )
    if late:
        what = (
            f"the last minute's p95 latency was {state.latency_p95_ms:,.0f} ms, over the {latency_target_ms:,.0f} ms target "
            f"at {rate:,.0f} rec/s" + (f"; {what}" if growth > 0 else "")
        )
    return Alarm(f"{what}, so the decision is made now, not at the next interval", growth, rate)


def last_decision(store: StateStore, job: str) -> tuple[float, bool] | None:
    """(when ``job`` last decided, whether that decision changed the job), None before its first."""
    last = store.decisions(job, limit=1)
    return (float(last["ts"].iloc[-1]), bool(last["changed"].iloc[-1])) if not last.empty else None


def check_cluster(
    job: str,
    realizer: Realizer,
    source: MetricsSource,
    store: StateStore,
    now: float,
    *,
    latency_target_ms: float | None,
    rule: WatchRule = WatchRule(),
) -> Alarm | None:
    """:func:`check` on what the cluster runs (``realizer``) and ``source`` holds for the last window,
    against the job's last decision in ``store``. None when this instant is decided already (a rerun
    after a kill) or the cluster cannot be read (the scheduled decision reads and says why)."""
    last = last_decision(store, job)
    last_ts, changed = last if last is not None else (None, False)
    if last_ts is not None and last_ts >= now:
        return None
    try:
        current = realizer.current(job)
        samples = source.fetch(job, int((now - rule.window_s - rule.settle_s) * 1000), int(now * 1000) + 1)
    except Exception as exc:  # the watch never stops anything
        log.warning("watch for %s skipped: %s", job, exc)
        return None
    return check(
        job, samples, current, now, last_decision_ts=last_ts, latency_target_ms=latency_target_ms, rule=rule, last_changed=changed
    )


def step_if_alarmed(loop: DecisionLoop, now: float, rule: WatchRule = WatchRule()) -> StepOutcome | None:
    """One decision of ``loop`` now when the watch fires (its reason says why it came early), else None."""
    alarm = check_cluster(
        loop.job, loop.realizer, loop.source, loop.store, now, latency_target_ms=loop.settings.latency_target_ms, rule=rule
    )
    return loop.step(trigger=alarm.reason, window_s=rule.window_s) if alarm is not None else None


def watch_chunks(interval: int, every_s: int) -> list[int]:
    """An interval of ``interval`` seconds cut into watch-sized runs of the cluster (a simulated one):
    one run when the watch is off (``every_s`` <= 0) or no faster than the interval."""
    if every_s <= 0 or every_s >= interval:
        return [interval]
    n, rest = divmod(interval, every_s)
    return [every_s] * n + ([rest] if rest else [])
