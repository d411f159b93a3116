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
