"""Reconfiguration cost by mode: redeploy vs in-place rescale vs live state migration (what-if)."""

import math

import numpy as np
import pytest

from flinktune.config_space import Configuration
from flinktune.twin import ClusterProfile, TwinJob
from flinktune.twin import mechanics as mech
from flinktune.twin.reconfig_modes import MigrationSettings, mode_costs, reconfiguration_costs

PROF = ClusterProfile.default("tsw")
A, B = Configuration(8, 2, 2.0, 4096, 30), Configuration(16, 2, 2.0, 4096, 30)


def test_live_migration_has_no_downtime_and_a_bounded_latency_bump():
    c = mode_costs(PROF, A, B, 20000.0)
    size = float(mech.state_mb(PROF, 20000.0)[0])
    assert c["redeploy"].downtime_s == pytest.approx(mech.reconfiguration(PROF, A, B, size, "redeploy")[1])
    assert 0 < c["rescale"].downtime_s < c["redeploy"].downtime_s
    assert c["redeploy"].added_latency_ms == pytest.approx(1000 * c["redeploy"].downtime_s)
    m = c["migrate"]
    assert m.downtime_s == 0 and 0 < m.added_latency_ms < c["rescale"].added_latency_ms and m.duration_s > 0
    # Smaller batches: a smaller bump, a longer migration.
    small = mode_costs(PROF, A, B, 20000.0, MigrationSettings(batch_mb=0.25))["migrate"]
    assert small.added_latency_ms < m.added_latency_ms and small.duration_s > m.duration_s


def test_rescale_is_infeasible_when_resources_change_and_says_why():
    c = mode_costs(PROF, A, Configuration(8, 2, 3.0, 4096, 30), 20000.0)
    assert not c["rescale"].feasible and "cpu" in c["rescale"].why and math.isnan(c["rescale"].downtime_s)
    assert c["migrate"].feasible and c["migrate"].downtime_s == 0
    assert mode_costs(PROF, A, A, 20000.0)["migrate"].added_latency_ms == 0


def test_costs_of_a_twin_run_one_row_per_change_and_mode():
    twin = TwinJob(PROF, A, seed=0)
    twin.run(np.full(120, 20000.0))
    twin.apply(B)
    twin.run(np.full(120, 20000.0))
    twin.apply(B)  # no-op: not costed
    df = reconfiguration_costs(PROF, twin.reconfigurations, twin.history())
    assert list(df["mode"]) == ["redeploy", "rescale", "migrate"] and (df["applied_mode"] == "rescale").all()
    assert df.set_index("mode").loc["rescale", "downtime_s"] == pytest.approx(twin.reconfigurations[0]["downtime_s"], rel=0.05)
