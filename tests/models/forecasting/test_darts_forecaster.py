"""DartsQuantileForecaster on a synthetic seasonal trace (tiny TiDE, CPU, few epochs)."""

import numpy as np
import pandas as pd
import pytest
import torch

from models.forecasting.darts_forecaster import DartsQuantileForecaster, resolve_accelerator
from models.forecasting.planning import planned_rate
from models.forecasting.seasonal_naive import SeasonalNaiveForecaster
from models.forecasting.types import ForecastInputError

BINS = 8 * 60  # 8 h of minutes
SPLIT = 6 * 60


def _trace(seed: int = 0) -> pd.Series:
    rng = np.random.default_rng(seed)
    t = np.arange(BINS)
    y = 40_000 + 20_000 * np.sin(2 * np.pi * t / 120) + rng.normal(0, 1_500, BINS)
    return pd.Series(y, index=pd.date_range("2024-03-01", periods=BINS, freq="60s", tz="UTC"))


@pytest.fixture(scope="module")
def trace() -> pd.Series:
    return _trace()


@pytest.fixture(scope="module")
def fitted(trace) -> DartsQuantileForecaster:
    return DartsQuantileForecaster(n_epochs=15, device="cpu", seed=0).fit(trace.iloc[:SPLIT])


def test_p90_peak_covers_the_truth_and_beats_naive(fitted, trace):
    naive = SeasonalNaiveForecaster().fit(trace.iloc[:SPLIT])
    covered, err, err_naive = [], [], []
    for origin in range(SPLIT, BINS - 10, 10):
        truth = trace.iloc[origin : origin + 10].max()
        fc = fitted.predict(trace.iloc[:origin], 600)
        covered.append(truth <= fc.peak(0.9))
        err.append(abs(fc.peak(0.5) - truth))
        err_naive.append(abs(naive.predict(trace.iloc[:origin], 600).peak() - truth))
    assert len(covered) == 11
    assert np.mean(covered) >= 0.7, covered
    assert np.mean(err) < np.mean(err_naive), (np.mean(err), np.mean(err_naive))


def test_forecast_shape_start_and_monotone_quantiles(fitted, trace):
    history = trace.iloc[:SPLIT]
    fc = fitted.predict(history, 600)
    assert fc.bin_s == 60 and len(fc.mean) == 10
    assert fc.start == history.index[-1] + pd.Timedelta(seconds=60)
    levels = sorted(fc.quantiles)
    assert {0.5, 0.9, 0.99} <= set(levels)
    stacked = np.vstack([fc.quantiles[q] for q in levels])
    assert (np.diff(stacked, axis=0) >= 0).all()
    assert (fc.quantiles[0.01] <= fc.mean).all() and (fc.mean <= fc.quantiles[0.99]).all()


def test_horizon_beyond_one_network_step_is_rolled_out_by_sampling(fitted, trace):
    fc = fitted.predict(trace.iloc[:SPLIT], 1500)  # 25 bins, 3 network steps
    assert len(fc.mean) == 25
    stacked = np.vstack([fc.quantiles[q] for q in sorted(fc.quantiles)])
    assert (np.diff(stacked, axis=0) >= 0).all()
    again = fitted.predict(trace.iloc[:SPLIT], 1500)
    np.testing.assert_allclose(again.mean, fc.mean)  # seeded sampling


def test_predict_uses_only_the_context_window(fitted, trace):
    history = trace.iloc[:SPLIT]
    # A 100-minute outage long ago: fit would refuse it, predict only reads the last hour.
    gappy = pd.concat([history.iloc[:100], history.iloc[200:]])
    with pytest.raises(ForecastInputError, match="gap of 100 missing"):
        DartsQuantileForecaster(n_epochs=1).fit(gappy)
    fc_full = fitted.predict(history, 600)
    fc_gappy = fitted.predict(gappy, 600)
    np.testing.assert_allclose(fc_gappy.quantiles[0.9], fc_full.quantiles[0.9], rtol=1e-5)


def test_bad_inputs(fitted, trace):
    with pytest.raises(ForecastInputError, match=r"predict history: history too short: 30 bins .* need at least 60"):
        fitted.predict(trace.iloc[:30], 600)
    with pytest.raises(ForecastInputError, match="horizon_s must be positive"):
        fitted.predict(trace.iloc[:SPLIT], 0)
    with pytest.raises(ForecastInputError, match=r"fit series: history too short: 50 bins .* need at least 100"):
        DartsQuantileForecaster(n_epochs=1).fit(trace.iloc[:50])
    with pytest.raises(RuntimeError, match="before fit"):
        DartsQuantileForecaster().predict(trace, 600)


def test_save_load_round_trip_is_exact(fitted, trace, tmp_path):
    path = fitted.save(tmp_path / "fc")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["fc"]  # no temp leftovers
    loaded = DartsQuantileForecaster.load(path)
    a, b = fitted.predict(trace.iloc[:SPLIT], 600), loaded.predict(trace.iloc[:SPLIT], 600)
    for q in a.quantiles:
        np.testing.assert_allclose(a.quantiles[q], b.quantiles[q], rtol=1e-6)
    with pytest.raises(FileNotFoundError, match=r"no meta.json"):
        DartsQuantileForecaster.load(tmp_path)


def test_planned_rate_rules_on_a_real_forecast(fitted, trace):
    fc = fitted.predict(trace.iloc[:SPLIT], 600)
    assert planned_rate(fc, "max_mean_x1.10") == pytest.approx(fc.mean.max() * 1.10)
    assert planned_rate(fc, "quantile:0.99") == pytest.approx(fc.quantiles[0.99].max())


def test_cuda_is_refused_without_a_gpu_and_auto_falls_back():
    if torch.cuda.is_available():
        assert resolve_accelerator("auto") == "gpu"
    else:
        assert resolve_accelerator("auto") == "cpu"
        with pytest.raises(ValueError, match="cuda"):
            resolve_accelerator("cuda")
    with pytest.raises(ValueError, match="device must be"):
        resolve_accelerator("tpu")


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_fits_and_predicts_on_gpu(trace):
    model = DartsQuantileForecaster(n_epochs=3, device="cuda").fit(trace.iloc[:SPLIT])
    fc = model.predict(trace.iloc[:SPLIT], 600)
    assert np.isfinite(fc.mean).all()
