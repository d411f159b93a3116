"""Input repair rules for rate series (models.forecasting.series_prep)."""

import numpy as np
import pandas as pd
import pytest

from models.forecasting.series_prep import prepare_rate_series
from models.forecasting.types import ForecastInputError


def _series(values, start="2024-01-01", step="60s", tz="UTC", dtype="float64"):
    idx = pd.date_range(start, periods=len(values), freq=step, tz=tz)
    return pd.Series(np.asarray(values, dtype=dtype), index=idx)


def test_irregular_one_second_samples_are_averaged_into_minute_bins():
    s = _series(np.arange(180), step="1s")
    out = prepare_rate_series(s, bin_s=60).values
    assert list(out.to_numpy()) == [29.5, 89.5, 149.5]
    assert str(out.index.tz) == "UTC" and out.index.freqstr in ("60s", "60S", "min", "T")


def test_other_time_zone_is_converted_and_bins_align_to_epoch():
    s = _series([1.0, 2.0, 3.0], start="2024-01-01 01:00:30", tz="Europe/Berlin")
    out = prepare_rate_series(s, bin_s=60).values
    assert out.index[0] == pd.Timestamp("2024-01-01 00:00:00", tz="UTC")
    assert out.iloc[0] == 1.0


def test_duplicates_and_unsorted_samples_are_averaged():
    s = _series([1.0, 3.0, 5.0])
    s = pd.concat([s, pd.Series([7.0], index=[s.index[0]])]).iloc[::-1]
    out = prepare_rate_series(s, bin_s=60).values
    assert list(out.to_numpy()) == [4.0, 3.0, 5.0]


def test_nan_samples_are_dropped_and_short_gaps_interpolated():
    s = _series([10.0, np.nan, np.nan, 40.0, 50.0])
    prep = prepare_rate_series(s, bin_s=60, max_gap_bins=2)
    assert prep.dropped_nan == 2 and prep.interpolated_bins == 2
    assert list(prep.values.to_numpy()) == [10.0, 20.0, 30.0, 40.0, 50.0]


def test_long_gap_is_refused_with_its_time_range():
    s = _series([1.0] * 3 + [np.nan] * 4 + [1.0])
    with pytest.raises(
        ForecastInputError, match=r"gap of 4 missing 60s bins from 2024-01-01T00:03:00\+00:00 to 2024-01-01T00:06:00\+00:00"
    ):
        prepare_rate_series(s, bin_s=60, max_gap_bins=3)


@pytest.mark.parametrize(
    "bad, match",
    [
        (pd.Series([1.0, 2.0], index=pd.date_range("2024-01-01", periods=2, freq="60s")), "tz-naive"),
        (pd.Series([1.0, 2.0]), "DatetimeIndex"),
        ([1.0, 2.0], "expected a pandas Series"),
        (_series([1.0, -2.0]), r"negative rate -2.0 at 2024-01-01T00:01:00"),
        (_series([1.0, np.inf]), "non-finite rate at 2024-01-01T00:01:00"),
        (_series(["a", "b"], dtype=object), "numeric"),
        (_series([np.nan, np.nan]), "no usable samples"),
    ],
)
def test_bad_inputs_raise_clear_errors(bad, match):
    with pytest.raises(ForecastInputError, match=match):
        prepare_rate_series(bad, where="unit series")


def test_too_short_history_names_both_counts():
    with pytest.raises(ForecastInputError, match=r"unit: history too short: 3 bins of 60s .* need at least 5"):
        prepare_rate_series(_series([1.0, 2.0, 3.0]), min_bins=5, where="unit")
