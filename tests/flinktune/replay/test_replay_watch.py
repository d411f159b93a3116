"""flinktune's replay is watched between decisions: a step in the load is met before the next interval."""

import numpy as np
import pandas as pd

from flinktune.config_space import default_space
from flinktune.replay import ReplaySettings, replay_policy
from flinktune.twin import ClusterProfile

SPACE = default_space()


def _step_trace() -> pd.Series:
    # 40 min at 15k rec/s (the policy sizes down to it), then 50k: the step starts 2 min after a decision.
    rates = np.r_[np.full(42 * 60, 15000.0), np.full(18 * 60, 50000.0)]
    return pd.Series(rates, index=pd.date_range("2024-01-01", periods=rates.size, freq="1s", tz="UTC"), name="rate")


def _replay(watch_every_s: int):
    settings = ReplaySettings(seed=5, failures="none", watch_every_s=watch_every_s)
    return replay_policy("flinktune", _step_trace(), ClusterProfile.default("ysb"), SPACE, settings, interval_s=600)


def test_a_step_between_decisions_is_decided_early_and_says_why():
    watched, unwatched = _replay(60), _replay(0)
    early = [d for d in watched.decisions if "decided before the next interval" in d["reason"]]
    assert early, [d["reason"] for d in watched.decisions]
    assert all(d["ts"] % 600 != 0 for d in early)
    assert "backlog grew by" in early[0]["reason"]
    assert not any("decided before the next interval" in d["reason"] for d in unwatched.decisions)
    step = pd.Timestamp("2024-01-01 00:42", tz="UTC")
    lag_watched = watched.minutes.loc[watched.minutes.index >= step, "lag"].max()
    lag_unwatched = unwatched.minutes.loc[unwatched.minutes.index >= step, "lag"].max()
    assert lag_watched < lag_unwatched
