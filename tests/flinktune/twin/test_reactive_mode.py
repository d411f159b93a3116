"""Flink's reactive mode in the twin: every rescale restarts from the last checkpoint, and a lost
TaskManager restarts the job twice (without it, then again when it registers back)."""

from __future__ import annotations

import numpy as np

from flinktune.config_space import Configuration
from flinktune.decision.reconfig import ReconfigMode
from flinktune.twin import ClusterProfile, TwinJob
from flinktune.twin.adapters import TwinRealizer

PROFILE = ClusterProfile.default("ysb")
P24 = Configuration(24, 1, 1.0, 4096, 10)
RATE = 20000.0


def _down_stretches(twin: TwinJob) -> int:
    running = twin.history()["running"].to_numpy()
    return int(np.sum((running[1:] < 0.5) & (running[:-1] >= 0.5)))


def test_a_rescale_in_reactive_mode_restarts_from_the_last_checkpoint():
    # 15 s after start: a checkpoint completed at ~10 s, so ~5 s of input is replayed.
    plain, reactive = TwinJob(PROFILE, P24, seed=1), TwinJob(PROFILE, P24, seed=1, reactive=True)
    for t in (plain, reactive):
        t.run(np.full(15, RATE))
    lag_before = reactive.lag
    plain.apply(P24.with_(parallelism=16))
    reactive.apply(P24.with_(parallelism=16))
    assert plain.last_reconfiguration["mode"] == "rescale"
    assert reactive.last_reconfiguration["mode"] == "restart"
    assert reactive.lag > lag_before + 2 * RATE  # the records since the checkpoint are input again
    assert plain.lag == lag_before


def test_the_realizer_reports_a_reactive_rescale_as_a_restart():
    twin = TwinJob(PROFILE, P24, seed=1, reactive=True)
    twin.run(np.full(30, RATE))
    result = TwinRealizer(twin, job="demo").apply("demo", P24.with_(parallelism=16))
    assert result.changed and result.mode is ReconfigMode.RESTART


def test_a_failure_in_reactive_mode_restarts_the_job_twice():
    # The TaskManager is back 60 s after the fault, well after the first restart (20 s detection + restart).
    prof = PROFILE.model_copy(update={"tm_rejoin_s": 60.0})

    def run(reactive: bool) -> TwinJob:
        twin = TwinJob(prof, P24, seed=2, failures="every:5m", reactive=reactive)
        twin.run(np.full(420, RATE))
        return twin

    plain, reactive = run(False), run(True)
    assert plain.restarts == reactive.restarts == 1  # one failure: the second restart is not another failure
    assert _down_stretches(plain) == 1
    assert _down_stretches(reactive) == 2
    running = reactive.history()["running"].to_numpy()
    down = np.flatnonzero(running < 0.5)
    assert down[-1] - down[0] >= 60 - 5  # the second stop comes when the TaskManager registers back
    assert reactive.history()["lag"].sum() > plain.history()["lag"].sum()  # the second restart adds backlog


def test_a_taskmanager_back_while_the_job_is_still_down_needs_no_second_restart():
    prof = PROFILE.model_copy(update={"tm_rejoin_s": 5.0})  # back before the 20 s detection is over
    twin = TwinJob(prof, P24, seed=2, failures="every:5m", reactive=True)
    twin.run(np.full(420, RATE))
    assert _down_stretches(twin) == 1


def test_reactive_mode_survives_a_state_round_trip():
    twin = TwinJob(PROFILE, P24, seed=3, failures="every:5m", reactive=True)
    twin.run(np.full(310, RATE))  # the failure at ~5 min: the second restart is still pending
    again = TwinJob.from_state_dict(twin.state_dict())
    assert again.reactive
    a, b = twin.run(np.full(60, RATE), emit=False), again.run(np.full(60, RATE), emit=False)
    assert a.equals(b)
    assert np.array_equal(twin.history()["running"].to_numpy()[-60:], again.history()["running"].to_numpy()[-60:])
