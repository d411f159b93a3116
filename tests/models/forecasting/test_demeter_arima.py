"""The Demeter ARIMA baseline (real pmdarima fits on short series, few strides)."""

import numpy as np
import pandas as pd
import pytest

from models.forecasting.demeter_arima import DemeterArimaForecaster, combine_stride_forecasts, demeter_preprocess
from models.forecasting.types import ForecastInputError

STRIDES = (60, 120, 240)
FAST = dict(strides_s=STRIDES, max_fit_points=60)  # few short fits: keeps the module to seconds


def _ramp(hours: float = 2.0, step: str = "1s", seed: int = 0) -> pd.Series:
    idx = pd.date_range("2024-01-01", periods=int(hours * 3600 / pd.Timedelta(step).total_seconds()), freq=step, tz="UTC")
    t = (idx - idx[0]).total_seconds().to_numpy()
    rng = np.random.default_rng(seed)
    return pd.Series(20_000 + 2.0 * t + rng.normal(0, 300, len(t)), index=idx)


@pytest.fixture(scope="module")
def fitted() -> DemeterArimaForecaster:
    return DemeterArimaForecaster(**FAST).fit(_ramp())


def test_preprocess_keeps_a_cubic_and_removes_noise():
    t = np.arange(600.0)
    cubic = 1e-5 * (t - 300) ** 3 + 50
    assert np.allclose(demeter_preprocess(np.full(600, 7.0)), 7.0)
    inner = slice(100, 500)  # the window-edge effects of the centred mean stay at the edges
    # The 60-sample (even) centred window lags by half a sample; otherwise the cubic passes through.
    half_back = 1e-5 * (t - 0.5 - 300) ** 3 + 50
    np.testing.assert_allclose(demeter_preprocess(cubic)[inner], half_back[inner], atol=0.05)
    noise = np.random.default_rng(0).normal(0, 1, 600)
    assert demeter_preprocess(noise).std() < 0.5 * noise.std()


def test_combination_weights_later_strides_more():
    a = np.full(121, np.nan)
    b = np.full(121, np.nan)
    a[60], b[60] = 100.0, 200.0
    out = combine_stride_forecasts([a, b], last_value=0.0, rolling_s=1)
    # EWM over [a, b] with span 5: (1 - 1/3) * 100 + 1/3 * 200; interpolation from row 0 (= last value).
    assert out[59] == pytest.approx(400 / 3)
    assert out[29] == pytest.approx(400 / 3 / 2)


def test_forecast_follows_the_ramp_and_starts_after_history(fitted):
    history = _ramp()
    fc = fitted.predict(history, 600)
    assert len(fc.mean) == 10 and fc.start == history.index[-1] + pd.Timedelta(seconds=1)
    expected = 20_000 + 2.0 * (7200 + 30 + 60 * np.arange(10))  # bin centres
    assert np.abs(fc.mean - expected).max() < 0.03 * expected.max(), (fc.mean, expected)
    assert set(fc.quantiles) == {0.5} and np.array_equal(fc.quantiles[0.5], fc.mean)
    assert fitted.fit_info["models"] == 3


def test_minute_input_is_upsampled_and_save_load_round_trips(tmp_path):
    minutes = _ramp(hours=3).resample("60s").mean()
    model = DemeterArimaForecaster(**FAST, input_bin_s=60).fit(minutes)
    fc = model.predict(minutes, 600)
    assert fc.start == minutes.index[-1] + pd.Timedelta(minutes=1)
    again = DemeterArimaForecaster.load(model.save(tmp_path / "demeter"))
    np.testing.assert_allclose(again.predict(minutes, 600).mean, fc.mean)
    assert not list(tmp_path.glob(".*tmp"))


def test_bad_input_is_refused_or_repaired(fitted):
    with pytest.raises(ForecastInputError, match=r"fit series: history too short: 300 bins of 1s .* need at least 1440"):
        DemeterArimaForecaster(**FAST).fit(_ramp(hours=300 / 3600))
    gappy = _ramp()
    gappy.iloc[1000:1100] = np.nan
    with pytest.raises(ForecastInputError, match="gap of 100 missing 1s bins from 2024-01-01T00:16:40"):
        fitted.predict(gappy, 600)
    # Irregular sampling (jittered timestamps, some missing) is binned and interpolated.
    irregular = _ramp().iloc[::3]
    irregular.index = irregular.index + pd.to_timedelta(np.random.default_rng(1).integers(0, 2, len(irregular)), unit="s")
    assert np.isfinite(fitted.predict(irregular, 600).mean).all()
    with pytest.raises(RuntimeError, match="before fit"):
        DemeterArimaForecaster().predict(_ramp(), 600)
    with pytest.raises(ValueError, match="increasing positive"):
        DemeterArimaForecaster(strides_s=(60, 30))
