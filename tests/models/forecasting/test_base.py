"""ForecastingModel: every forecaster derives from it, and what the base promises holds for the real models."""

import numpy as np
import pandas as pd
import pytest

from flinktune.runs.forecaster_candidates import CANDIDATES, build_candidate
from models.forecasting.base import ForecastingModel
from models.forecasting.pyfunc import _KINDS
from models.forecasting.seasonal_naive import SeasonalNaiveForecaster
from models.forecasting.types import ForecastInputError


def _series(n: int) -> pd.Series:
    rng = np.random.default_rng(3)
    values = 1000 + 200 * np.sin(np.arange(n) / 15) + rng.normal(0, 20, n)
    return pd.Series(values, index=pd.date_range("2024-01-01", periods=n, freq="60s", tz="UTC"))


def test_every_candidate_and_every_loadable_kind_is_a_forecasting_model():
    build = dict(bin_s=60, horizon_s=600, n_epochs=1, device="cpu", seed=0)
    models = {c: build_candidate(c, **build) for c in (*CANDIDATES, "darts-ets", "demeter-arima")}
    assert all(isinstance(m, ForecastingModel) for m in models.values())
    # Only the yardstick is unregistrable; every other candidate needs some history to fit.
    assert [c for c, m in models.items() if not m.registrable] == ["seasonal-naive"]
    assert all(m.min_fit_bins > 0 and isinstance(m.params(), dict) for m in models.values())
    assert models["tide-quantile"].predict_bins == models["tide-quantile"].input_bins
    import importlib

    for module, cls in _KINDS.values():
        assert issubclass(getattr(importlib.import_module(module), cls), ForecastingModel)


def test_the_base_cannot_be_built_without_fit_predict_and_history_needs():
    with pytest.raises(TypeError, match="abstract"):
        ForecastingModel()  # type: ignore[abstract]

    class NoPredict(ForecastingModel):
        name, bin_s = "half", 60

        def fit(self, series):
            return self

        min_fit_bins = 1

        def params(self):
            return {}

    with pytest.raises(TypeError, match="predict"):
        NoPredict()  # type: ignore[abstract]


def test_seasonal_naive_needs_exactly_min_fit_bins_and_is_not_saved(tmp_path):
    model = SeasonalNaiveForecaster(default_horizon_s=600)
    assert model.min_fit_bins == 12  # a 10-bin season plus two differences
    with pytest.raises(ForecastInputError, match="fit series"):
        model.fit(_series(model.min_fit_bins - 1))
    model.fit(_series(model.min_fit_bins))
    with pytest.raises(NotImplementedError, match="'seasonal-naive' cannot be saved"):
        model.save(tmp_path / "m")
    rebuilt = SeasonalNaiveForecaster(**{k: tuple(v) if isinstance(v, list) else v for k, v in model.params().items()})
    assert rebuilt.params() == model.params()


def test_default_historical_forecasts_are_the_per_origin_predicts():
    s = _series(60)
    model = SeasonalNaiveForecaster().fit(s.iloc[:30])
    origins = s.index[[30, 41, 59]]
    batch = model.historical_forecasts(s, origins, 300)
    for o, fc in zip(origins, batch):
        one = model.predict(s[s.index < o], 300)
        assert fc.start == o == one.start
        np.testing.assert_array_equal(fc.quantiles[0.9], one.quantiles[0.9])
