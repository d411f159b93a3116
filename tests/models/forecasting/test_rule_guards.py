"""The guards against selection optimism in the rule choice (models.forecasting.backtest, champion).

Each test builds a small synthetic selection backtest on which the plain choice (point estimate of the
under-forecast rate, plain minimum of the peak MAE) picks a rule or a champion on noise, and checks that
the guarded choice does not, while a real effect still gets through.
"""

import numpy as np
import pandas as pd
import pytest

from models.forecasting.backtest import (
    IDENTITY_PEAK_RULE,
    BacktestResult,
    BacktestWindow,
    SelectedBacktest,
    choose_rules,
    effective_origins,
    select_peak_rule,
    select_rule,
    summarize,
    under_rate_upper_bound,
)
from models.forecasting.champion import choose_champion
from models.forecasting.types import QuantileForecast

_T0 = pd.Timestamp("2024-01-01", tz="UTC")


def _flat_forecasts(n: int, level: float = 100.0) -> list[QuantileForecast]:
    return [
        QuantileForecast(_T0, 60, np.array([level]), {0.5: np.array([level]), 0.9: np.array([level * 1.3])}) for _ in range(n)
    ]


def _blocks(values: list[float], block: int = 10) -> np.ndarray:
    return np.repeat(np.array(values, dtype=float), block)


def test_wilson_bound_and_effective_origins():
    # With no miss seen, Wilson's upper bound is z^2 / (n + z^2): 0 of 35 blocks is not a 0 % rate.
    assert under_rate_upper_bound(0.0, 35, z=1.0) == pytest.approx(1 / 36)
    assert under_rate_upper_bound(0.04, 40, z=0.0) == 0.04  # z=0: the point estimate
    assert 0.04 < under_rate_upper_bound(0.04, 40, z=1.0) < under_rate_upper_bound(0.04, 10, z=1.0) < 1
    assert effective_origins(351, 10) == pytest.approx(35.1) and effective_origins(3, 10) == 1.0


def test_peak_factor_within_one_standard_error_of_the_plain_peak_is_not_chosen():
    # Forecast 100 everywhere; truth 94 in six blocks of one horizon, 101 in four. x0.95 has the lower
    # mean error (3.0 against 4.0) but the paired block differences are +5 / -5: the gain is 1.0, its
    # standard error 1.63, so it is the span's noise and the plain peak stays.
    peaks = _blocks([94, 101, 94, 101, 94, 94, 101, 94, 101, 94])
    fcs = _flat_forecasts(len(peaks))
    assert select_peak_rule(fcs, peaks) == "max_mean_x0.95"  # the plain minimum (no guard)
    assert select_peak_rule(fcs, peaks, block=10, n_se=1.0) == IDENTITY_PEAK_RULE


def test_a_real_peak_bias_is_still_corrected():
    # Forecast 100, truth 94-96 in every block: x0.95 wins in every block, far beyond one standard error.
    peaks = _blocks([94, 95, 96, 94, 95, 96, 94, 95, 96, 95])
    fcs = _flat_forecasts(len(peaks))
    assert select_peak_rule(fcs, peaks, block=10, n_se=1.0) == "max_mean_x0.95"


def test_planning_rule_is_chosen_on_the_upper_bound_of_its_under_forecast_rate():
    # 400 origins (40 blocks of one horizon); 16 of them (4 %) peak at 104 against a forecast of 100.
    peaks = np.full(400, 100.0)
    peaks[[5, 6, 7, 8, 105, 106, 107, 108, 205, 206, 207, 208, 305, 306, 307, 308]] = 104.0
    fcs = _flat_forecasts(len(peaks))
    assert select_rule(fcs, peaks, 0.05) == "max_mean_x1.00"  # 4 % <= 5 % on the point estimate
    # 4 % of 40 independent blocks has an upper bound of 7.4 %: the cheapest rule that covers 104 wins.
    assert under_rate_upper_bound(0.04, 40) > 0.05
    assert select_rule(fcs, peaks, 0.05, block=10, z=1.0) == "max_mean_x1.04"


def _result(peaks: np.ndarray, level: float, name: str) -> BacktestResult:
    """A selection backtest of one-minute bins whose 10-minute window peaks are ``peaks`` (non-increasing, so
    each window's peak is its first bin), every origin forecast flat at ``level``."""
    assert (np.diff(peaks) <= 0).all()
    values = np.r_[np.full(20, level), peaks, np.full(9, peaks[-1])]
    series = pd.Series(values, index=pd.date_range(_T0, periods=values.size, freq="60s"))
    window = BacktestWindow(series, series.index[20], 600)
    assert np.array_equal(window.truth_peaks(), peaks)
    fcs = [
        QuantileForecast(o, 60, np.full(10, level), {0.5: np.full(10, level), 0.9: np.full(10, level * 1.3)})
        for o in window.origins
    ]
    return BacktestResult(name, window, fcs)


def test_choose_rules_passes_the_peak_guard_on():
    peaks = _blocks([101] * 4 + [94] * 6)  # as in the test above, in one order (the blocks are what counts)
    result = _result(peaks, 100.0, "m")
    assert choose_rules(result)[1] == "max_mean_x0.95"  # default: the plain minimum (see PEAK_RULE_N_SE)
    assert choose_rules(result, peak_n_se=1.0)[1] == IDENTITY_PEAK_RULE


def test_champion_needs_its_under_forecast_bound_within_the_target():
    # "lucky" has the lower selection peak MAE and 4 % misses on 40 blocks (point estimate safe, bound 7.4 %);
    # "sound" misses nothing. The plain rule crowns "lucky", the guarded one "sound".
    peaks = np.r_[np.full(16, 104.0), np.full(384, 100.0)]
    lucky, sound = _result(peaks, 100.0, "lucky"), _result(peaks, 105.0, "sound")
    backtests = {
        name: SelectedBacktest(r, r, summarize(r, rule="max_mean_x1.00", peak_rule="max_mean_x1.00"))
        for name, r in (("lucky", lucky), ("sound", sound))
    }
    assert summarize(lucky, rule="max_mean_x1.00", peak_rule="max_mean_x1.00")["under_rate"] == pytest.approx(16 / 400)
    assert choose_champion(backtests, planning_z=0).name == "lucky"
    assert choose_champion(backtests, planning_z=1).name == "sound"


def test_rules_script_rescores_saved_backtests_per_variant(tmp_path):
    import pickle

    from benchmarks.forecasting.forecasting_rules import main, rescore

    noisy = _result(_blocks([101] * 4 + [94] * 6), 100.0, "peak-gbm")  # x0.95 wins within noise
    biased = _result(_blocks([95] * 10), 100.0, "darts-peak-linear")  # x0.95 is a real 5 % bias
    saved = {
        name: SelectedBacktest(r, r, summarize(r, rule="max_mean_x1.00", peak_rule="max_mean_x1.00"))
        for name, r in (("demeter-arima", noisy), ("peak-gbm", noisy), ("darts-peak-linear", biased))
    }
    plain, guarded = rescore(saved, 0.0, 0.0), rescore(saved, 0.0, 1.0)
    assert (plain["peak-gbm"]["peak_rule"], guarded["peak-gbm"]["peak_rule"]) == ("max_mean_x0.95", IDENTITY_PEAK_RULE)
    assert guarded["darts-peak-linear"]["peak_rule"] == "max_mean_x0.95"
    assert guarded["peak-gbm"]["vs_demeter"] == pytest.approx(1.0)  # Demeter gets the same rule choice
    assert guarded["champion"]["chosen"] == "darts-peak-linear" and guarded["champion"]["peak_mae"] == pytest.approx(
        0.0, abs=1e-9
    )
    path = tmp_path / "saved.pkl"
    path.write_bytes(pickle.dumps({("syn", 1): saved}))
    assert set(main([str(path), "--variants", "plain,both"])) == {("plain", "syn", 1), ("both", "syn", 1)}
