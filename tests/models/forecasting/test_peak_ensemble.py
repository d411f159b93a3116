"""DartsPeakEnsemble: the quantile-wise mean of its darts peak members, batched = single, saved and loaded, a champion candidate."""

import numpy as np
import pandas as pd
import pytest

from models.forecasting.darts_peak import DartsPeakForecaster
from models.forecasting.peak_ensemble import DartsPeakEnsemble, combine_forecasts
from models.forecasting.pyfunc import load_forecaster
from models.forecasting.types import QuantileForecast
from tests.models.forecasting.test_darts_peak import _trace


def test_combine_averages_level_by_level_and_keeps_the_shared_levels():
    start = pd.Timestamp("2024-03-01", tz="UTC")
    a = QuantileForecast(
        start,
        60,
        np.array([1.0, 2.0]),
        {0.5: np.array([1.0, 2.0]), 0.9: np.array([2.0, 3.0])},
        peak_quantiles={0.5: 2.0, 0.9: 3.0},
    )
    b = QuantileForecast(
        start,
        60,
        np.array([3.0, 4.0]),
        {0.5: np.array([3.0, 4.0]), 0.9: np.array([5.0, 5.0]), 0.99: np.array([6.0, 6.0])},
        peak_quantiles={0.5: 4.0, 0.9: 5.0, 0.99: 6.0},
    )
    c = combine_forecasts([a, b])
    assert sorted(c.quantiles) == [0.5, 0.9] and c.model == "darts-peak-ensemble"
    np.testing.assert_allclose(c.mean, [2.0, 3.0])
    np.testing.assert_allclose(c.quantiles[0.9], [3.5, 4.0])
    assert c.peak_quantiles == {0.5: 3.0, 0.9: 4.0}
    with pytest.raises(ValueError, match="bins"):
        combine_forecasts([a, QuantileForecast(start + pd.Timedelta("60s"), 60, np.array([1.0, 2.0]))])


def test_the_ensemble_is_the_mean_of_its_members_batched_or_single_and_survives_save_and_load(tmp_path):
    raw = _trace()
    kw = dict(input_bin_s=10, quantiles=(0.5, 0.9), max_iter=20, seed=1)
    ens = DartsPeakEnsemble(**kw).fit(raw.iloc[: 4 * 360])
    members = [DartsPeakForecaster(estimator=e, **kw).fit(raw.iloc[: 4 * 360]) for e in ("linear", "hgb")]
    origins = pd.date_range(raw.index[0] + pd.Timedelta(hours=4, minutes=10), periods=3, freq="120s")
    batch = ens.historical_forecasts(raw, origins, 600)
    for o, fc in zip(origins, batch):
        parts = [m.predict(raw[raw.index < o], 600) for m in members]
        assert fc.start == o and len(fc.mean) == 10 and fc.model == "darts-peak-ensemble"
        for q in (0.5, 0.9):
            assert fc.peak_quantiles[q] == pytest.approx(np.mean([p.peak_quantiles[q] for p in parts]), rel=1e-9)
            np.testing.assert_allclose(fc.quantiles[q], np.mean([p.quantiles[q] for p in parts], axis=0), rtol=1e-9)
        assert fc.peak_quantiles[0.5] <= fc.peak_quantiles[0.9]
    restored = load_forecaster(str(ens.save(tmp_path / "m")))
    assert isinstance(restored, DartsPeakEnsemble) and restored.params() == ens.params()
    again = restored.predict(raw[raw.index < origins[0]], 600)
    assert again.peak_quantiles == pytest.approx(batch[0].peak_quantiles, rel=1e-9)
    # What a refit from the registry rebuilds (lists turned to tuples, as jobs.train_forecaster does).
    assert (
        DartsPeakEnsemble(**{k: tuple(v) if isinstance(v, list) else v for k, v in ens.params().items()}).params() == ens.params()
    )


def test_it_is_a_champion_candidate_of_the_benchmark_the_job_and_the_rule_rescoring():
    from benchmarks.forecasting.forecasting import _READS_RAW, CHAMPION_CANDIDATES
    from flinktune.runs.forecaster_candidates import CANDIDATES, build_candidate

    assert "darts-peak-ensemble" in CHAMPION_CANDIDATES and "darts-peak-ensemble" in _READS_RAW
    assert "darts-peak-ensemble" in CANDIDATES
    model = build_candidate("darts-peak-ensemble", bin_s=60, horizon_s=600, n_epochs=1, device="cpu", seed=0)
    assert isinstance(model, DartsPeakEnsemble) and model.input_bin_s == 60 and model.registrable
    with pytest.raises(ValueError, match="at least two distinct"):
        DartsPeakEnsemble(estimators=("linear",))


def test_the_rules_script_rebuilds_the_ensemble_from_saved_member_forecasts():
    from benchmarks.forecasting.forecasting_rules import rescore, with_ensemble
    from models.forecasting.backtest import BacktestResult, BacktestWindow, SelectedBacktest, summarize

    values = np.r_[np.full(20, 100.0), np.full(30, 110.0)]
    series = pd.Series(values, index=pd.date_range("2024-03-01", periods=values.size, freq="60s", tz="UTC"))
    window = BacktestWindow(series, series.index[20], 600)

    def saved(level: float, name: str) -> SelectedBacktest:
        fcs = [
            QuantileForecast(
                o,
                60,
                np.full(10, level),
                {0.5: np.full(10, level), 0.9: np.full(10, level + 20)},
                peak_quantiles={0.5: level, 0.9: level + 20},
            )
            for o in window.origins
        ]
        result = BacktestResult(name, window, fcs, 1.0, 10.0)
        return SelectedBacktest(result, result, summarize(result, rule="max_mean_x1.00", peak_rule="max_mean_x1.00"))

    backtests = {"darts-peak-linear": saved(100.0, "darts-peak-linear"), "darts-peak-hgb": saved(120.0, "darts-peak-hgb")}
    out = with_ensemble(backtests)
    ens = out["darts-peak-ensemble"]
    assert ens.report.forecasts[0].peak_quantiles == {0.5: 110.0, 0.9: 130.0}
    assert (ens.report.fit_s, ens.report.predict_ms) == (2.0, 20.0)
    assert ens.metrics["peak_mae"] == pytest.approx(0.0) and ens.metrics["peak_rule"] == "max_mean_x1.00"
    assert with_ensemble(out) is out and with_ensemble({"darts-peak-linear": backtests["darts-peak-linear"]}).keys() == {
        "darts-peak-linear"
    }
    assert rescore(out, 0.0, 0.0)["champion"]["chosen"] == "darts-peak-ensemble"  # exact, so it wins


def test_direct_peak_forecasts_keep_the_plain_peak_unless_asked():
    from models.forecasting.backtest import BacktestResult, BacktestWindow, choose_rules

    peaks = np.repeat([101.0] * 4 + [94.0] * 6, 10)  # x0.95 has the lower selection MAE
    values = np.r_[np.full(20, 100.0), peaks, np.full(9, peaks[-1])]
    series = pd.Series(values, index=pd.date_range("2024-03-01", periods=values.size, freq="60s", tz="UTC"))
    window = BacktestWindow(series, series.index[20], 600)

    def result(direct: bool) -> BacktestResult:
        peak = {0.5: 100.0, 0.9: 130.0} if direct else {}
        return BacktestResult(
            "m",
            window,
            [
                QuantileForecast(
                    o, 60, np.full(10, 100.0), {0.5: np.full(10, 100.0), 0.9: np.full(10, 130.0)}, peak_quantiles=peak
                )
                for o in window.origins
            ],
        )

    assert choose_rules(result(True))[1] == "max_mean_x1.00"  # the default (DIRECT_PEAK_PLAIN)
    assert choose_rules(result(True), direct_peak_plain=False)[1] == "max_mean_x0.95"
    assert choose_rules(result(False))[1] == "max_mean_x0.95"  # bin-mean forecasts still choose a factor


def test_the_backtest_built_from_the_members_equals_the_ensembles_own():
    # What the retraining job relies on to skip fitting each member a second time.
    from models.forecasting.backtest import backtest_select_then_report
    from models.forecasting.peak_ensemble import ensemble_backtest

    raw = _trace(hours=6.0)
    kw = dict(input_bin_s=10, quantiles=(0.5, 0.9), max_iter=20, seed=1)
    spans = dict(select_start=raw.index[0] + pd.Timedelta(hours=4), report_start=raw.index[0] + pd.Timedelta(hours=5),
                 horizon_s=600, stride_bins=1)  # fmt: skip
    binned = raw.resample("60s").mean()  # the truth in the forecast's bins; the models read the 10 s input
    own = backtest_select_then_report(DartsPeakEnsemble(**kw), binned, inputs=raw, **spans)
    members = [
        backtest_select_then_report(DartsPeakForecaster(estimator=e, **kw), binned, inputs=raw, **spans)
        for e in ("linear", "hgb")
    ]
    built = ensemble_backtest(members)
    assert built.metrics.keys() == own.metrics.keys()
    for key, value in own.metrics.items():
        if key not in ("fit_s", "predict_ms"):
            assert built.metrics[key] == (pytest.approx(value, rel=1e-9) if isinstance(value, float) else value), key
    for a, b in zip(built.report.forecasts, own.report.forecasts, strict=True):
        assert a.peak_quantiles == pytest.approx(b.peak_quantiles, rel=1e-9)
    with pytest.raises(ValueError, match="at least two members"):
        ensemble_backtest(members[:1])
