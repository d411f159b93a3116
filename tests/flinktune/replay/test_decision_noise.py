"""The operator autoscaler's reading spread fitted on a measured change rate (flinktune.replay.decision_noise)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from flinktune.config_space import default_space
from flinktune.policies.autoscaler import AutoscalerPolicy
from flinktune.replay.decision_noise import fit_decision_noise
from flinktune.replay.harness import ReplaySettings
from flinktune.twin.profile import ClusterProfile

PROFILE = ClusterProfile.default("ysb")
# Operator 1.6 as Demeter ran it: short windows and no delayed scale-down, so an hour holds several decisions.
OPTIONS = AutoscalerPolicy.published_options("demeter-1.6", default_space())


def _trace(hours: float = 1.0) -> pd.Series:
    """A steady rate: read exactly, the operator settles after its first scale-downs."""
    n = int(hours * 3600)
    return pd.Series(np.full(n, 9000.0), index=pd.date_range("2026-01-01", periods=n, freq="1s", tz="UTC"))


@pytest.fixture(scope="module")
def fits() -> tuple:
    st = ReplaySettings(workload="ysb", failures="none", seed=5, forecaster="naive")
    space = default_space()
    low = fit_decision_noise(_trace(), PROFILE, space, st, OPTIONS, 0.0, sigmas=(0.0, 0.5), workers=1)
    high = fit_decision_noise(_trace(), PROFILE, space, st, OPTIONS, 1000.0, sigmas=(0.0, 0.5), workers=1)
    return low, high


def test_a_noisier_reading_changes_the_job_more_and_the_fit_follows_the_measured_rate(fits) -> None:
    low, high = fits
    by_sigma = low.table.set_index("sigma")["changes_per_hour"]
    assert by_sigma[0.5] > by_sigma[0.0]  # a noisy reading leaves the bounds at a steady rate, so it keeps changing
    assert low.sigma == 0.0 and high.sigma == 0.5
    assert list(low.table["sigma"]) == [0.0, 0.5] and (low.table["cpu"] > 0).all()
    assert "busy_time_noise 0 fitted on the measured operator's 0.00 changes per hour" in low.note


def test_bad_input_is_named() -> None:
    st = ReplaySettings(workload="ysb", failures="none")
    space = default_space()
    with pytest.raises(ValueError, match="measured_per_hour"):
        fit_decision_noise(_trace(), PROFILE, space, st, OPTIONS, float("nan"))
    with pytest.raises(ValueError, match="sigmas must be non-negative"):
        fit_decision_noise(_trace(), PROFILE, space, st, OPTIONS, 1.0, sigmas=(-0.1,))
    with pytest.raises(ValueError, match="at least a minute"):
        fit_decision_noise(_trace(0.005), PROFILE, space, st, OPTIONS, 1.0)
