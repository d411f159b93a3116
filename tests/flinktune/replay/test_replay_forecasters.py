"""The replay's forecasters: the peak model by name, and the naive fallback while the history is short."""

import pandas as pd
import pytest

from flinktune.config_space import default_space
from flinktune.replay.models import FORECASTERS, ReplayModels, make_forecaster
from flinktune.twin import ClusterProfile, generate_trace


def test_make_forecaster_knows_peak_and_names_the_known_kinds_otherwise():
    assert "peak" in FORECASTERS
    assert type(make_forecaster("peak", horizon_s=600, seed=1)).__name__ == "DirectPeakForecaster"
    with pytest.raises(ValueError, match="known: naive, darts, peak"):
        make_forecaster("arima", horizon_s=600, seed=1)


def test_the_fallback_answers_until_the_peak_model_has_its_31_minutes_of_history():
    trace = generate_trace("ysb", 1.0, 3)
    past = generate_trace("ysb", 24.0, 1003, start=trace.index[0] - pd.Timedelta(hours=24))
    peak = make_forecaster("peak", horizon_s=600, seed=3).fit(past)
    naive = make_forecaster("naive", horizon_s=600, seed=3).fit(past)
    models = ReplayModels(ClusterProfile.default("ysb"), default_space(), peak, seed=3, fallback=naive)
    short, long = trace.iloc[: 20 * 60], trace.iloc[: 40 * 60]
    early = models.forecast(short, 600)
    assert early is not None and early.model == naive.name and not early.peak_quantiles
    later = models.forecast(long, 600)
    assert later is not None and later.model == peak.name and 0.9 in later.peak_quantiles
    # Without a fallback a short history gives no forecast (the policy then holds).
    assert ReplayModels(ClusterProfile.default("ysb"), default_space(), peak, seed=3).forecast(short, 600) is None
