"""Backtest windows, metrics and rule choice (models.forecasting.backtest) with real forecasters."""

import numpy as np
import pandas as pd
import pytest

from models.forecasting.backtest import BacktestWindow, run_backtest, select_rule, summarize
from models.forecasting.seasonal_naive import SeasonalNaiveForecaster
from models.forecasting.statistical import StatisticalForecaster
from models.forecasting.types import ForecastInputError, QuantileForecast


def _periodic(bins: int = 400, period: int = 10, noise: float = 0.0, seed: int = 0) -> pd.Series:
    t = np.arange(bins)
    y = 1_000 + 300 * np.sin(2 * np.pi * t / period) + np.random.default_rng(seed).normal(0, noise, bins)
    return pd.Series(y, index=pd.date_range("2024-01-01", periods=bins, freq="60s", tz="UTC"))


def test_window_origins_truth_and_errors():
    s = _periodic(100)
    w = BacktestWindow(s, s.index[60], 600, stride_bins=5)
    assert list(w.origins) == list(s.index[60:91:5]) and len(w.train) == 60
    assert w.truth_peaks()[0] == pytest.approx(s.iloc[60:70].max())
    with pytest.raises(ForecastInputError, match="no origin at or after 2024-01-01T01:35:00"):
        BacktestWindow(s, s.index[95], 600)
    with pytest.raises(ForecastInputError, match="regular tz-aware index"):
        BacktestWindow(s.iloc[[0, 2, 3]], s.index[1], 60)


def test_seasonal_naive_is_perfect_on_a_clean_cycle_of_one_horizon():
    s = _periodic()
    w = BacktestWindow(s, s.index[300], 600)
    m = summarize(run_backtest(SeasonalNaiveForecaster(), w))
    assert m["raw_peak_mae"] == pytest.approx(0, abs=1e-6) and m["under_rate"] == 0
    assert m["origins"] == 61 and m["predict_ms"] > 0 and m["fit_s"] >= 0


def test_darts_historical_forecasts_equal_one_predict_per_origin():
    s = _periodic(bins=360, period=60, noise=20)
    model = StatisticalForecaster(kind="theta", calib_origins=20, train_bins=60)
    w = BacktestWindow(s, s.index[300], 600, stride_bins=7)
    result = run_backtest(model, w)  # darts historical_forecasts underneath
    for o, fc in zip(w.origins, result.forecasts):
        direct = model.predict(s[s.index < o], 600)
        np.testing.assert_allclose(fc.mean, direct.mean, rtol=1e-6)
        np.testing.assert_allclose(fc.quantiles[0.9], direct.quantiles[0.9], rtol=1e-6)
    levels = sorted(result.forecasts[0].quantiles)
    assert (np.diff(np.vstack([result.forecasts[0].quantiles[q] for q in levels]), axis=0) >= 0).all()


def test_rule_choice_is_the_cheapest_safe_rule():
    fcs = [QuantileForecast(pd.Timestamp("2024-01-01", tz="UTC"), 60, np.array([100.0]),
                            {0.5: np.array([100.0]), 0.9: np.array([119.5])}) for _ in range(20)]
    peaks = np.array([100.0] * 18 + [115.0, 119.0])
    assert select_rule(fcs, peaks, 0.0) == "quantile:0.9"  # covers 119 and is cheaper than x1.20
    assert select_rule(fcs, peaks, 0.05) == "max_mean_x1.15"  # misses 119 only: 1 in 20
    assert select_rule(fcs, peaks, 0.10) == "max_mean_x1.00"  # misses 115 and 119: 2 in 20
    # Nothing is safe: the least unsafe rules (x1.00 and up miss the ten 300s), then the cheapest of them.
    assert select_rule(fcs, np.array([100.0] * 10 + [300.0] * 10), 0.05) == "max_mean_x1.00"
