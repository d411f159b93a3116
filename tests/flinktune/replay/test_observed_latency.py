"""The latency a real run's metric reports: the per-second p95 over the seconds the job runs."""

from __future__ import annotations

import numpy as np
import pandas as pd

from flinktune.config_space import default_space
from flinktune.replay.metrics import OBSERVED_LATENCY_COLUMNS, observed_latency, summarize
from flinktune.twin import ClusterProfile
from flinktune.twin.simulator import TwinJob


def _hist(latency: list[float], running: list[float]) -> pd.DataFrame:
    n = len(latency)
    return pd.DataFrame(
        {"latency_p95_ms": latency, "running": running, "lag": np.zeros(n), "rate": np.full(n, 100.0), "ts": np.arange(n)}
    )


def test_the_seconds_the_job_is_down_are_left_out() -> None:
    # 96 running seconds at 100 ms and 4 stopped ones whose records wait 60 s: a real histogram reports
    # none of the 4, so every quantile reads the running seconds.
    hist = _hist([100.0] * 96 + [60_000.0] * 4, [1.0] * 96 + [0.0] * 4)
    obs = observed_latency(hist)
    assert list(obs) == list(OBSERVED_LATENCY_COLUMNS)
    assert obs == {c: 100.0 for c in OBSERVED_LATENCY_COLUMNS}
    # The same seconds all running: the 99th percentile reaches the waiting records.
    assert observed_latency(_hist([100.0] * 96 + [60_000.0] * 4, [1.0] * 100))["observed_latency_p99_ms"] > 10_000


def test_a_job_that_never_runs_reports_no_latency() -> None:
    assert all(np.isnan(v) for v in observed_latency(_hist([5.0, 6.0], [0.0, 0.0])).values())


def test_a_redeploy_weighs_less_observed_than_every_second() -> None:
    # A real twin run with one savepoint redeploy: its down seconds carry the piling wait in the
    # every-second p95; observed, only the drain after it counts.
    space = default_space()
    job = TwinJob(ClusterProfile.default("ysb").with_(latency_noise=0.0), space.maximum)
    job.run(np.full(600, 20_000.0), emit=False)
    mx = space.maximum
    job.apply(mx.with_(parallelism=mx.parallelism // 2), mode="redeploy")
    job.run(np.full(600, 20_000.0), emit=False)
    hist = job.history()
    assert (hist["running"] < 0.5).sum() > 0
    row = summarize(hist, job.reconfigurations, None, 180.0)
    running = hist["latency_p95_ms"][hist["running"] >= 0.5]
    assert row["observed_latency_p95_ms"] == np.quantile(running, 0.95)
    assert row["observed_latency_p99_ms"] < row["latency_p99_ms"]
