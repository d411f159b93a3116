"""Backtest windows, metrics and rule choice (models.forecasting.backtest) with real forecasters."""

import numpy as np
import pandas as pd
import pytest

from models.forecasting.backtest import (
    BacktestWindow,
    backtest_select_then_report,
    choose_rules,
    run_backtest,
    select_rule,
    selection_window,
    summarize,
)
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
    m = summarize(run_backtest(SeasonalNaiveForecaster(), w), rule="max_mean_x1.00", peak_rule="max_mean_x1.00")
    assert m["raw_peak_mae"] == pytest.approx(0, abs=1e-6) and m["under_rate"] == 0
    assert m["origins"] == 91 and m["predict_ms"] > 0 and m["fit_s"] >= 0


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
    fcs = [
        QuantileForecast(
            pd.Timestamp("2024-01-01", tz="UTC"), 60, np.array([100.0]), {0.5: np.array([100.0]), 0.9: np.array([119.5])}
        )
        for _ in range(20)
    ]
    peaks = np.array([100.0] * 18 + [115.0, 119.0])
    assert select_rule(fcs, peaks, 0.0) == "quantile:0.9"  # covers 119 and is cheaper than x1.20
    assert select_rule(fcs, peaks, 0.05) == "max_mean_x1.15"  # misses 119 only: 1 in 20
    assert select_rule(fcs, peaks, 0.10) == "max_mean_x1.00"  # misses 115 and 119: 2 in 20
    # Nothing is safe: the least unsafe rules (x1.00 and up miss the ten 300s), then the cheapest of them.
    assert select_rule(fcs, np.array([100.0] * 10 + [300.0] * 10), 0.05) == "max_mean_x1.00"


def _calm_then_noisy(calm_bins: int = 300, noisy_bins: int = 120) -> pd.Series:
    """Constant 1000 rec/s, then 0-400 rec/s of random excess: a calm selection span, a wild report span."""
    y = np.r_[np.full(calm_bins, 1_000.0), 1_000 + np.random.default_rng(3).uniform(0, 400, noisy_bins)]
    return pd.Series(y, index=pd.date_range("2024-01-01", periods=y.size, freq="60s", tz="UTC"))


def test_rules_come_from_the_selection_span_only():
    s = _calm_then_noisy()
    select_start, report_start = s.index[200], s.index[300]
    run = backtest_select_then_report(SeasonalNaiveForecaster(), s, select_start=select_start, report_start=report_start)
    # Calm selection span: the last window repeats exactly, so x1.00 is the cheapest safe rule and the best peak.
    assert (run.metrics["rule"], run.metrics["peak_rule"]) == ("max_mean_x1.00", "max_mean_x1.00")
    # The report span would have chosen otherwise, and the chosen rule under-forecasts there.
    assert choose_rules(run.report)[0] != "max_mean_x1.00" and run.metrics["under_rate"] > 0.3
    # No selection origin's truth reaches the report span; every report origin is scored.
    assert run.selection.window.series.index[-1] < report_start and run.selection.window.origins[0] == select_start
    assert list(run.report.window.origins) == list(s.index[300:411]) and run.metrics["origins"] == 111
    # The model is refitted before the report: the first fit ended at select_start, the second at report_start.
    assert run.selection.window.train.index[-1] < select_start <= run.report.window.train.index[-1]


def test_a_short_selection_span_is_refused_with_the_span_named():
    s = _calm_then_noisy()
    # 13 bins: 4 origins with a whole 10-bin horizon before the report span, one fewer than needed.
    with pytest.raises(
        ForecastInputError,
        match=r"selection span 2024-01-01T04:47:00\+00:00 to 2024-01-01T05:00:00\+00:00 "
        r"is too short: 13 bins of 60s give 4 origins",
    ):
        backtest_select_then_report(SeasonalNaiveForecaster(), s, select_start=s.index[287], report_start=s.index[300])
    assert len(selection_window(s, s.index[286], s.index[300]).origins) == 5  # one bin more is enough
    with pytest.raises(ForecastInputError, match="give 0 origins"):
        selection_window(s, s.index[295], s.index[300])
    with pytest.raises(ValueError, match="must be before report_start"):
        selection_window(s, s.index[300], s.index[300])


class _FitLog(SeasonalNaiveForecaster):
    """Seasonal naive that records where each fit's data ends (the stage under test is the backtest)."""

    def __init__(self):
        super().__init__()
        self.fit_ends: list[pd.Timestamp] = []

    def fit(self, series):
        self.fit_ends.append(series.index[-1])
        return super().fit(series)


def test_forward_chained_selection_refits_before_each_part():
    s = _calm_then_noisy()
    select_start, report_start = s.index[200], s.index[300]
    model = _FitLog()
    run = backtest_select_then_report(model, s, select_start=select_start, report_start=report_start, select_refits=3)
    origins = run.selection.window.origins  # 91 origins (100 bins less a 10-bin horizon, plus one)
    assert len(origins) == 91 and len(run.selection.forecasts) == 91
    assert [fc.start for fc in run.selection.forecasts] == list(origins)
    # Parts of 31, 30 and 30 origins: each fit ends one bin before its part; then the report refit.
    assert model.fit_ends == [s.index[199], s.index[230], s.index[260], s.index[299]]
    assert run.selection.extra == {"select_refits": 3}
    # The rules come from the chained forecasts: same calm span, same choice as with one fit.
    one = backtest_select_then_report(_FitLog(), s, select_start=select_start, report_start=report_start)
    assert (run.metrics["rule"], run.metrics["peak_rule"]) == (one.metrics["rule"], one.metrics["peak_rule"])
    assert run.metrics["peak_mae"] == one.metrics["peak_mae"]  # the report refit is the same


def test_chained_selection_changes_the_forecasts_of_later_parts():
    # A level that climbs through the selection span: the refits learn the climb's season-over-season offset, so
    # the later parts' forecasts move, while the first part (fitted before select_start either way) is unchanged.
    s = _periodic(420, period=10, noise=30.0, seed=5)
    s.iloc[250:] += np.linspace(0, 600, 170)
    single = backtest_select_then_report(SeasonalNaiveForecaster(), s, select_start=s.index[200], report_start=s.index[320])
    chained = backtest_select_then_report(
        SeasonalNaiveForecaster(), s, select_start=s.index[200], report_start=s.index[320], select_refits=4
    )
    first, late = slice(0, 28), slice(28, None)  # 111 origins in parts of 28, 28, 28, 27
    pairs = list(zip(single.selection.forecasts, chained.selection.forecasts))
    assert all(np.array_equal(a.mean, b.mean) for a, b in pairs[first])
    assert sum(not np.array_equal(a.mean, b.mean) for a, b in pairs[late]) == len(pairs[late])


def test_select_refits_out_of_range_is_refused_and_ignored_without_fitting():
    s = _calm_then_noisy()
    with pytest.raises(ValueError, match="select_refits must be between 1 and the 91 selection origins, got 0"):
        backtest_select_then_report(
            SeasonalNaiveForecaster(), s, select_start=s.index[200], report_start=s.index[300], select_refits=0
        )
    with pytest.raises(ValueError, match="got 92"):
        backtest_select_then_report(
            SeasonalNaiveForecaster(), s, select_start=s.index[200], report_start=s.index[300], select_refits=92
        )
    saved = _FitLog().fit(s.iloc[:200])
    saved.fit_ends.clear()
    backtest_select_then_report(saved, s, select_start=s.index[200], report_start=s.index[300], fit=False, select_refits=3)
    assert saved.fit_ends == []  # a saved champion is used as it is
