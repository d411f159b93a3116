"""Indexes read back from parquet carry microsecond units; forecasters must not assume nanoseconds."""

import numpy as np
import pandas as pd

from models.forecasting.darts_forecaster import DartsQuantileForecaster


def test_historical_forecasts_accepts_microsecond_indexes():
    idx = pd.date_range("2024-01-01", periods=240, freq="60s", tz="UTC").as_unit("us")
    t = np.arange(240)
    series = pd.Series(20000 + 5000 * np.sin(t / 30.0), index=idx, name="rate")
    model = DartsQuantileForecaster(n_epochs=1, input_bins=30, output_bins=10, device="cpu").fit(series.iloc[:200])
    origins = series.index[200:230:5]
    out = model.historical_forecasts(series, origins, 600)
    assert len(out) == len(origins) and all(len(f.mean) == 10 for f in out)


def test_peak_models_accept_microsecond_indexes():
    # The demo's lake gives us-indexed series; the peak models' batched backtests must take them as they are.
    from models.forecasting.darts_peak import DartsPeakForecaster
    from models.forecasting.peak_forecaster import DirectPeakForecaster

    n = 400
    idx = pd.date_range("2024-01-01", periods=n, freq="60s", tz="UTC").as_unit("us")
    t = np.arange(n)
    series = pd.Series(20000 + 5000 * np.sin(t / 30.0), index=idx, name="rate")
    origins = series.index[300:380:7]
    for model in (
        DartsPeakForecaster(estimator="linear", bin_s=60, input_bin_s=60, default_horizon_s=600, seed=0),
        DirectPeakForecaster(bin_s=60, default_horizon_s=600, seed=0),
    ):
        model.fit(series.iloc[:300])
        out = model.historical_forecasts(series, origins, 600)
        assert [f.start for f in out] == list(origins) and all(len(f.mean) == 10 for f in out)
