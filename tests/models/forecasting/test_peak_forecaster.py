"""DirectPeakForecaster: real (small) boosted quantile trees on a synthetic noisy trace, CPU."""

import numpy as np
import pandas as pd
import pytest

from models.forecasting.peak_features import CONTEXT_BINS, FEATURE_NAMES, future_targets, window_features
from models.forecasting.peak_forecaster import DirectPeakForecaster
from models.forecasting.planning import planned_rate
from models.forecasting.pyfunc import load_forecaster
from models.forecasting.types import ForecastInputError, QuantileForecast

BINS = 6 * 60
SPLIT = 4 * 60
SMALL = dict(max_iter=30, min_train_origins=60)  # few rounds: keeps the module to seconds


def _trace(seed: int = 0) -> pd.Series:
    """A 2 h wave plus large bin-to-bin noise: the max of ten bins sits well above their median."""
    rng = np.random.default_rng(seed)
    t = np.arange(BINS)
    y = 50_000 + 15_000 * np.sin(2 * np.pi * t / 120) + rng.normal(0, 4_000, BINS)
    return pd.Series(y, index=pd.date_range("2024-03-01", periods=BINS, freq="60s", tz="UTC"))


@pytest.fixture(scope="module")
def trace() -> pd.Series:
    return _trace()


@pytest.fixture(scope="module")
def fitted(trace) -> DirectPeakForecaster:
    return DirectPeakForecaster(**SMALL).fit(trace.iloc[:SPLIT])


def test_features_and_targets_are_relative_to_the_last_bin():
    y = np.arange(100, dtype=float) * 2 + 10
    x = window_features(y, np.array([40, 50]), scale=2.0)
    assert x.shape == (2, len(FEATURE_NAMES))
    changes = dict(zip(FEATURE_NAMES, x[0]))
    assert changes["change_1"] == pytest.approx(1.0) and changes["change_30"] == pytest.approx(30.0)
    assert changes["volatility_10"] == pytest.approx(1.0) and changes["max10_above_last"] == 0.0
    assert changes["level"] == pytest.approx(y[39] / 2.0)
    tgt = future_targets(y, np.array([40]), 10, scale=2.0)
    np.testing.assert_allclose(tgt[0], [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 10])
    with pytest.raises(ValueError, match="31 bins of history"):
        window_features(y, np.array([CONTEXT_BINS - 1]), scale=1.0)


def test_forecast_shape_monotone_quantiles_and_peak_above_every_bin(fitted, trace):
    history = trace.iloc[:SPLIT]
    fc = fitted.predict(history, 600)
    assert fc.bin_s == 60 and len(fc.mean) == 10
    assert fc.start == history.index[-1] + pd.Timedelta(seconds=60)
    levels = sorted(fc.quantiles)
    assert {0.5, 0.9, 0.99} <= set(levels) and sorted(fc.peak_quantiles) == levels
    stacked = np.vstack([fc.quantiles[q] for q in levels])
    assert (np.diff(stacked, axis=0) >= 0).all()
    peak = np.array([fc.peak_quantiles[q] for q in levels])
    assert (np.diff(peak) >= 0).all()
    assert (peak >= stacked.max(axis=1) - 1e-9).all()
    assert fc.peak() == fc.peak_quantiles[0.5] and planned_rate(fc, "quantile:0.9") == fc.peak_quantiles[0.9]


def test_direct_peak_beats_the_max_of_its_own_bin_medians(fitted, trace):
    # On noisy bins the max of per-bin medians is biased low; the direct peak model is not.
    direct, pathmax = [], []
    for origin in range(SPLIT, BINS - 10, 5):
        truth = trace.iloc[origin : origin + 10].max()
        fc = fitted.predict(trace.iloc[:origin], 600)
        direct.append(abs(fc.peak() - truth))
        pathmax.append(abs(fc.mean.max() - truth))
    assert len(direct) == 22
    assert np.mean(direct) < 0.8 * np.mean(pathmax), (np.mean(direct), np.mean(pathmax))


def test_batched_historical_forecasts_equal_single_predicts(fitted, trace):
    origins = trace.index[SPLIT : SPLIT + 30 : 10]
    batch = fitted.historical_forecasts(trace, origins, 600)
    for o, fc in zip(origins, batch):
        one = fitted.predict(trace[trace.index < o], 600)
        assert fc.start == one.start == o
        np.testing.assert_allclose(fc.quantiles[0.99], one.quantiles[0.99])
        assert fc.peak_quantiles == pytest.approx(one.peak_quantiles)


def test_shorter_horizon_has_bins_only_and_longer_is_refused(fitted, trace):
    short = fitted.predict(trace.iloc[:SPLIT], 300)
    assert len(short.mean) == 5 and short.peak_quantiles == {}
    assert short.peak(0.9) == short.quantiles[0.9].max()
    with pytest.raises(ForecastInputError, match="exceeds the trained horizon of 10 bins"):
        fitted.predict(trace.iloc[:SPLIT], 900)


def test_too_short_history_is_refused(trace):
    with pytest.raises(ForecastInputError, match=r"fit series: history too short: 99 bins .* need at least 100"):
        DirectPeakForecaster(**SMALL).fit(trace.iloc[:99])
    with pytest.raises(ForecastInputError, match="predict history: history too short"):
        DirectPeakForecaster(**SMALL).fit(trace.iloc[:SPLIT]).predict(trace.iloc[:20], 600)


def test_nan_and_irregular_steps_are_repaired_long_gaps_refused(fitted, trace):
    # The same minutes sampled every ~10 s at jittered times, with some NaN samples.
    rng = np.random.default_rng(3)
    minutes = trace.iloc[SPLIT - 60 : SPLIT]
    stamps = np.concatenate([m + pd.to_timedelta(np.sort(rng.uniform(0, 59, 6)), unit="s") for m in minutes.index])
    values = np.repeat(minutes.to_numpy(), 6)
    values[rng.choice(len(values), 40, replace=False)] = np.nan
    irregular = pd.Series(values, index=pd.DatetimeIndex(stamps))
    fc = fitted.predict(irregular, 600)
    ref = fitted.predict(minutes, 600)
    assert fc.start == ref.start
    np.testing.assert_allclose(fc.quantiles[0.5], ref.quantiles[0.5])
    gappy = minutes.drop(minutes.index[-20:-10])
    with pytest.raises(ForecastInputError, match=r"gap of 10 missing 60s bins .* exceeds the repair limit of 5"):
        fitted.predict(gappy, 600)
    with pytest.raises(RuntimeError, match="before fit"):
        DirectPeakForecaster().predict(minutes, 600)


def test_save_load_roundtrip_through_the_pyfunc_loader(fitted, trace, tmp_path):
    fitted.save(tmp_path / "m")
    loaded = load_forecaster(str(tmp_path / "m"))
    assert isinstance(loaded, DirectPeakForecaster) and loaded.params() == fitted.params()
    a, b = fitted.predict(trace.iloc[:SPLIT], 600), loaded.predict(trace.iloc[:SPLIT], 600)
    np.testing.assert_allclose(a.quantiles[0.9], b.quantiles[0.9])
    assert a.peak_quantiles == b.peak_quantiles


def test_peak_quantiles_must_match_the_bin_levels():
    start = pd.Timestamp("2024-01-01", tz="UTC")
    with pytest.raises(ValueError, match="peak_quantiles levels"):
        QuantileForecast(
            start=start, bin_s=60, mean=np.ones(2), quantiles={0.5: np.ones(2), 0.9: np.ones(2)}, peak_quantiles={0.9: 2.0}
        )
