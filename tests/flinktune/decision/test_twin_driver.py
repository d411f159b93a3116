"""TwinDriver runs the twin one interval in watch-sized steps: the loop's clock follows it, every
sample reaches the sink, and the watch decides early between steps, never at the interval's end."""

from __future__ import annotations

import numpy as np
import pandas as pd

from flinktune.clock import ManualClock
from flinktune.config_space import default_space
from flinktune.decision.loop import LoopSettings, build_decision_loop
from flinktune.decision.store import MemoryStateStore
from flinktune.decision.twin_driver import TwinDriver
from flinktune.decision.watch import WatchRule
from flinktune.policies import make_policy
from flinktune.twin import ClusterProfile
from flinktune.twin.backend import twin_backend
from flinktune.twin.simulator import TwinJob

SPACE = default_space()
START = 1_700_000_000
INTERVAL = 300


def _driver(watch: WatchRule | None, frames: list[pd.DataFrame]) -> TwinDriver:
    twin = TwinJob(ClusterProfile.default("ysb"), SPACE.maximum, job="t", seed=3, start_ts=START, retain_s=INTERVAL + 60)
    clock = ManualClock(twin.now)
    loop = build_decision_loop(twin_backend(twin, clock), LoopSettings("t", 1000.0, window_s=INTERVAL, max_staleness_s=INTERVAL),
                               policy=make_policy("static", SPACE), space=SPACE, store=MemoryStateStore())  # fmt: skip
    return TwinDriver(twin, clock, loop, watch=watch, sink=frames.append)


def test_an_overload_is_decided_early_between_steps_and_the_sink_sees_every_second() -> None:
    frames: list[pd.DataFrame] = []
    driver = _driver(WatchRule(every_s=60), frames)
    overload = np.full(INTERVAL, 5_000_000.0)  # far beyond what the largest shape processes: the backlog grows
    early = list(driver.run_interval(overload, INTERVAL))
    assert early, "the watch never fired on a growing backlog"
    for outcome in early:
        assert "decided before the next interval" in outcome.decision.reason and "trigger" in outcome.decision.inputs
        assert START < outcome.state.ts < START + INTERVAL  # between steps, never at the interval's end
    assert len(frames) == INTERVAL // 60 and driver.clock.now() == driver.twin.now == START + INTERVAL
    seconds = np.unique(np.concatenate([f["ts_ms"].to_numpy() for f in frames]) // 1000)
    assert seconds.tolist() == list(range(START, START + INTERVAL))
    scheduled = driver.decide()
    assert scheduled.state.ts == START + INTERVAL and "trigger" not in scheduled.decision.inputs


def test_without_a_watch_one_step_and_a_short_tail_is_watched_only_before_its_end() -> None:
    frames: list[pd.DataFrame] = []
    assert list(_driver(None, frames).run_interval(np.full(INTERVAL, 5_000_000.0), INTERVAL)) == []
    assert len(frames) == 1
    watched = _driver(WatchRule(every_s=60), [])
    tail = np.full(180, 5_000_000.0)  # the trace's last 3 minutes: shorter than the interval
    early = [o.state.ts for o in watched.run_interval(tail, INTERVAL)]
    assert early == [START + 60, START + 120]  # not at the tail's end: nothing runs after it to decide early for
    assert watched.clock.now() == START + 180
