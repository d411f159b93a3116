"""DartsPeakForecaster and its covariates: causality, darts batching = single predicts, a learnt ramp, errors."""

import numpy as np
import pandas as pd
import pytest

from models.forecasting.darts_peak import DartsPeakForecaster
from models.forecasting.peak_covariates import context_input_bins, covariate_names, peak_covariates, peak_targets
from models.forecasting.types import ForecastInputError


def _trace(hours=5.0, step_s=10, seed=0):
    """A rate with a slow wave, a ramp and noise, on a ``step_s`` grid."""
    n = int(hours * 3600 / step_s)
    t = np.arange(n) * step_s
    rng = np.random.default_rng(seed)
    rate = 40_000 + 15_000 * np.sin(2 * np.pi * t / 5400) + 2.0 * t / 10 + rng.normal(0, 300, n)
    return pd.Series(rate, index=pd.date_range("2024-03-01", periods=n, freq=f"{step_s}s", tz="UTC"))


def test_covariates_read_only_the_past_and_targets_are_the_next_window_relative_to_the_origin():
    y = _trace(hours=2).to_numpy()
    cov = peak_covariates(y, input_bin_s=10, bin_s=60, scale=1000.0)
    assert cov.shape == (len(y), len(covariate_names(10)))
    ctx = context_input_bins(10, 60)
    assert np.isnan(cov[: ctx - 1]).all() and np.isfinite(cov[ctx - 1 :]).all()
    changed = y.copy()
    changed[400:] += 50_000  # the future moves; rows before 400 must not
    np.testing.assert_array_equal(peak_covariates(changed, input_bin_s=10, bin_s=60, scale=1000.0)[:400], cov[:400])
    tgt = peak_targets(y, input_bin_s=10, bin_s=60, horizon_bins=10, scale=1000.0)
    t = 500  # the window of 10 minute bins ending at t, relative to the bin one horizon (60 input bins) before
    bins = y[t - 59 : t + 1].reshape(10, 6).mean(axis=1)
    np.testing.assert_allclose(tgt[t], np.append(bins, bins.max()) / 1000.0 - y[t - 60] / 1000.0)
    assert np.isnan(tgt[:59]).all()


@pytest.mark.parametrize("estimator", ["linear", "hgb"])
def test_batched_forecasts_equal_single_predicts_and_quantiles_are_ordered(estimator, tmp_path):
    raw = _trace()
    model = DartsPeakForecaster(estimator=estimator, input_bin_s=10, quantiles=(0.5, 0.9), max_iter=20, seed=1)
    model.fit(raw.iloc[: 4 * 360])
    origins = pd.date_range(raw.index[0] + pd.Timedelta(hours=4, minutes=10), periods=4, freq="120s")
    batch = model.historical_forecasts(raw, origins, 600)
    for o, fc in zip(origins, batch):
        single = model.predict(raw[raw.index < o], 600)
        assert fc.start == single.start == o and len(fc.mean) == 10
        assert fc.peak_quantiles == pytest.approx(single.peak_quantiles, rel=1e-9)
        peaks = [fc.peak_quantiles[q] for q in sorted(fc.peak_quantiles)]
        assert peaks == sorted(peaks) and peaks[0] >= fc.quantiles[min(fc.quantiles)].max() - 1e-6
    restored = DartsPeakForecaster.load(model.save(tmp_path / "m"))
    again = restored.predict(raw[raw.index < origins[0]], 600)
    assert again.peak_quantiles == pytest.approx(batch[0].peak_quantiles, rel=1e-9)
    short = model.predict(raw[raw.index < origins[0]], 300)
    assert len(short.mean) == 5 and not short.peak_quantiles


def test_the_linear_model_learns_to_extrapolate_a_rise_that_persistence_misses():
    raw = _trace(hours=6, seed=3)
    model = DartsPeakForecaster(estimator="linear", input_bin_s=10, quantiles=(0.5,)).fit(raw.iloc[: 4 * 360])
    minute = raw.resample("60s").mean()
    origins = pd.date_range(raw.index[0] + pd.Timedelta(hours=4), periods=100, freq="60s")
    fcs = model.historical_forecasts(raw, origins, 600)
    truth = np.array([minute[(minute.index >= o) & (minute.index < o + pd.Timedelta(minutes=10))].max() for o in origins])
    model_err = np.mean(np.abs([fc.peak() for fc in fcs] - truth))
    last = np.array([raw[raw.index < o].iloc[-1] for o in origins])
    assert model_err < 0.5 * np.mean(np.abs(last - truth))


def test_bad_settings_and_inputs_are_refused_with_the_reason():
    with pytest.raises(ValueError, match="estimator must be one of"):
        DartsPeakForecaster(estimator="forest")
    with pytest.raises(ValueError, match="input_bin_s >= 1 dividing bin_s"):
        DartsPeakForecaster(input_bin_s=7)
    model = DartsPeakForecaster(input_bin_s=10, quantiles=(0.5,))
    with pytest.raises(RuntimeError, match="before fit"):
        model.predict(_trace(hours=1), 600)
    with pytest.raises(ForecastInputError, match="history too short"):
        model.fit(_trace(hours=1))
    model.fit(_trace(hours=4))
    with pytest.raises(ForecastInputError, match="exceeds the trained horizon"):
        model.predict(_trace(hours=1), 1200)
    with pytest.raises(ForecastInputError, match="predict history: history too short"):
        model.predict(_trace(hours=0.1), 600)
