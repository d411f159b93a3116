"""The censored capacity correction: kept-up runs bound capacity from below, and the twin's
throughput and keeps-up class come from one capacity (synthetic data with a known capacity)."""

from __future__ import annotations

import numpy as np

from flinktune.calibration.capacity_correction import fit_capacity_correction


def _synthetic(n: int = 160, seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    cores = rng.uniform(1, 10, n)
    capacity = 5000.0 * cores  # the truth; the "mechanism" below is 30 % optimistic everywhere
    rate = rng.uniform(5000, 60000, n)
    thr = np.minimum(rate, capacity) * rng.normal(1.0, 0.01, n)
    return cores[:, None], 1.3 * capacity, rate, thr, capacity


def test_kept_up_runs_are_censored_not_taken_as_capacity() -> None:
    x, mech, rate, thr, capacity = _synthetic()
    fit = fit_capacity_correction(x, mech, rate, thr, keeps_up_factor=0.95)
    cap = fit.capacity(x, mech)
    ample = capacity > 1.5 * rate
    # Read as capacity, a kept-up run's throughput (its rate) would put the fit near the rate;
    # censored, the capacity stays near the truth learned from the runs that fell behind.
    assert np.median(cap[ample] / capacity[ample]) > 0.85
    assert np.median(cap[ample] / rate[ample]) > 1.4
    behind = capacity < 0.8 * rate
    assert np.median(np.abs(cap[behind] / capacity[behind] - 1)) < 0.1


def test_throughput_is_min_of_kept_ratio_and_capacity_with_a_band() -> None:
    x, mech, rate, thr, _ = _synthetic(seed=1)
    fit = fit_capacity_correction(x, mech, rate, thr, keeps_up_factor=0.95)
    out = fit.throughput(x, mech, rate)
    assert np.allclose(out["throughput"], np.minimum(fit.kept_ratio * rate, out["capacity"]))
    assert 0.97 < fit.kept_ratio < 1.03 and fit.kept_lo <= fit.kept_ratio <= fit.kept_hi
    assert np.mean(out["throughput_lo"] <= out["throughput_hi"]) > 0.95
    # No run kept up: nothing says the rate is mis-recorded, the kept ratio is 1.
    none_kept = fit_capacity_correction(x, mech, rate, np.minimum(thr, 0.5 * rate), keeps_up_factor=0.95)
    assert none_kept.kept_ratio == 1.0
