"""Seasonal-naive baseline and the planning rules."""

import numpy as np
import pandas as pd
import pytest

from models.forecasting.planning import planned_rate
from models.forecasting.seasonal_naive import SeasonalNaiveForecaster
from models.forecasting.types import ForecastInputError, QuantileForecast


def _ramp(n: int) -> pd.Series:
    return pd.Series(np.arange(n, dtype="float64") * 10, index=pd.date_range("2024-01-01", periods=n, freq="60s", tz="UTC"))


def test_last_window_repeats_with_residual_offsets():
    s = _ramp(40)  # y[t] - y[t-10] is exactly 100 everywhere
    fc = SeasonalNaiveForecaster().fit(s).predict(s, 600)
    np.testing.assert_allclose(fc.mean, s.to_numpy()[-10:] + 100)
    np.testing.assert_allclose(fc.quantiles[0.9], fc.mean)
    assert fc.start == s.index[-1] + pd.Timedelta(seconds=60)


def test_explicit_season_cycles_and_quantiles_do_not_cross():
    rng = np.random.default_rng(1)
    s = pd.Series(rng.uniform(0, 100, 120), index=pd.date_range("2024-01-01", periods=120, freq="60s", tz="UTC"))
    fc = SeasonalNaiveForecaster(season_s=300).fit(s).predict(s, 900)  # 15 bins from a 5-bin season
    assert len(fc.mean) == 15
    np.testing.assert_allclose(fc.quantiles[0.5][:5], fc.quantiles[0.5][5:10])
    stacked = np.vstack([fc.quantiles[q] for q in sorted(fc.quantiles)])
    assert (np.diff(stacked, axis=0) >= 0).all() and (stacked >= 0).all()


def test_unfitted_horizon_learns_offsets_from_history():
    s = _ramp(40)
    fc = SeasonalNaiveForecaster(default_horizon_s=600).fit(s).predict(s, 300)
    np.testing.assert_allclose(fc.mean, s.to_numpy()[-5:] + 50)


def test_bad_inputs():
    with pytest.raises(ValueError, match="multiple of bin_s"):
        SeasonalNaiveForecaster(season_s=90)
    with pytest.raises(ForecastInputError, match="need at least 12"):
        SeasonalNaiveForecaster().fit(_ramp(5))
    with pytest.raises(ForecastInputError, match="need at least 10"):
        SeasonalNaiveForecaster().predict(_ramp(5), 600)


def _forecast() -> QuantileForecast:
    return QuantileForecast(
        start=pd.Timestamp("2024-01-01", tz="UTC"),
        bin_s=60,
        mean=np.array([100.0, 300.0, 200.0]),
        quantiles={0.5: np.array([90.0, 290.0, 210.0]), 0.9: np.array([150.0, 350.0, 400.0])},
        model="unit",
    )


@pytest.mark.parametrize(
    "rule, expected",
    [
        ("max_mean_x1.10", 330.0),
        ("max_mean_x1", 300.0),
        ("max_mean_x2.5", 750.0),
        ("quantile:0.9", 400.0),
        ("quantile:0.5", 290.0),
    ],
)
def test_planning_rules(rule, expected):
    assert planned_rate(_forecast(), rule) == pytest.approx(expected)


@pytest.mark.parametrize(
    "rule, match",
    [
        ("quantile:0.95", r"no quantile 0.95; available: \[0.5, 0.9\]"),
        ("p95", "unknown planning rule 'p95'"),
        ("max_mean_x0", "factor must be > 0"),
        ("quantile:1.5", "unknown planning rule"),
    ],
)
def test_planning_rule_errors(rule, match):
    with pytest.raises(ValueError, match=match):
        planned_rate(_forecast(), rule)
