"""Reconfiguration downtime and failure recovery on the twin."""

from __future__ import annotations

import numpy as np
import pytest

from flinktune.config_space import ConfigError, ConfigSpace, Configuration
from flinktune.twin.profile import ClusterProfile
from flinktune.twin.simulator import TwinJob

PROFILE = ClusterProfile.default()
MAX = ConfigSpace().maximum
RATE = 40_000.0


def _warm(cfg: Configuration = MAX, profile: ClusterProfile = PROFILE, **kw) -> TwinJob:
    twin = TwinJob(profile, cfg, seed=5, **kw)
    twin.run(np.full(120, RATE), emit=False)
    return twin


def test_unchanged_config_is_a_noop() -> None:
    twin = _warm()
    assert twin.apply(MAX) == 0.0 and twin.last_reconfiguration["mode"] == "noop"
    twin.run(np.full(30, RATE), emit=False)
    assert twin.history()["running"].min() == 1.0


def test_parallelism_only_rescales_in_place_briefly() -> None:
    twin = _warm()
    down = twin.apply(MAX.with_(parallelism=16))
    assert twin.last_reconfiguration["mode"] == "rescale" and 4 <= down <= 15
    down_up = _warm(MAX.with_(parallelism=16)).apply(MAX)
    assert down_up > down  # new TaskManagers must start


def test_other_knobs_or_no_adaptive_scheduler_redeploy() -> None:
    twin = _warm()
    down = twin.apply(MAX.with_(cpu=2.0))
    assert twin.last_reconfiguration["mode"] == "redeploy" and 30 <= down <= 90
    plain = _warm(profile=PROFILE.with_(adaptive_scheduler=False))
    assert plain.apply(MAX.with_(parallelism=16)) >= 30 and plain.last_reconfiguration["mode"] == "redeploy"
    with pytest.raises(ConfigError, match=r"\['cpu'\] need a redeploy"):
        _warm().apply(MAX.with_(cpu=2.0), mode="rescale")


def test_redeploy_downtime_grows_with_taskmanagers() -> None:
    few = _warm(Configuration(8, 4, 2.0, 4096, 10)).apply(Configuration(8, 4, 3.0, 4096, 10))
    many = _warm(Configuration(24, 1, 1.0, 4096, 10)).apply(Configuration(24, 1, 1.0, 2048, 10))
    assert many > few + 10


def test_during_downtime_nothing_is_processed_and_input_becomes_lag() -> None:
    twin = _warm()
    down = twin.apply(MAX.with_(memory_mb=2048))
    twin.run(np.full(200, RATE), emit=False)
    h = twin.history().iloc[120:]
    stopped = int(np.floor(down))
    assert (h["throughput"].iloc[:stopped] == 0).all() and (h["running"].iloc[:stopped] == 0).all()
    assert h["lag"].iloc[stopped - 1] == pytest.approx(RATE * stopped)
    assert h["lag"].iloc[-1] < RATE  # caught up with spare capacity afterwards
    assert (h["memory_mb"] == 2048).all()


def test_failure_replays_from_last_checkpoint_then_catches_up() -> None:
    twin = _warm(failures="none")
    fail_at = twin.inject_failure()
    interval = MAX.checkpoint_interval_s
    twin.run(np.full(400, RATE), emit=False)
    h = twin.history()
    i = fail_at - twin.start_ts
    # Failure hits lead seconds before the next checkpoint: the replay is a whole interval minus the lead.
    replay = h["lag"].iloc[i] - h["lag"].iloc[i - 1] - RATE  # the second's own input is lag too
    assert replay == pytest.approx(RATE * (interval - PROFILE.failure_lead_s), rel=0.02)
    assert h["restarts"].iloc[i] == 1 and h["restarts"].iloc[i - 1] == 0
    down = PROFILE.failure_detection_s + PROFILE.restart_base_s + PROFILE.restart_per_tm_s * MAX.taskmanagers
    assert h["running"].iloc[i : i + int(down)].sum() == 0 and h["running"].iloc[i - 1] == 1
    after = h.iloc[i + int(down) + 2 :]
    assert after["throughput"].max() > 1.5 * RATE  # catch-up uses spare capacity...
    assert after["throughput"].max() <= after["capacity"].max()  # ...and no more
    assert h["lag"].iloc[-1] < RATE


def test_every_schedule_hits_just_before_a_checkpoint() -> None:
    twin = TwinJob(PROFILE, MAX.with_(checkpoint_interval_s=90), seed=1, failures="every:45m")
    twin.run(np.full(3 * 3600 + 600, RATE), emit=False)
    h = twin.history()
    assert twin.restarts == 4
    jumps = np.flatnonzero(np.diff(h["restarts"].to_numpy()) > 0) + 1
    for i in jumps:  # each replays (almost) a whole interval: the worst case
        assert h["lag"].iloc[i] - h["lag"].iloc[i - 1] - RATE == pytest.approx(RATE * (90 - PROFILE.failure_lead_s), rel=0.02)


def test_failure_spec_errors_are_clear() -> None:
    with pytest.raises(ValueError, match="'sometimes'"):
        TwinJob(PROFILE, MAX, failures="sometimes")
    with pytest.raises(ValueError, match="in the past"):
        _warm().inject_failure(at_ts=0)
