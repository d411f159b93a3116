"""Input repair for rate series: turn whatever a metrics source produced into regular UTC bins.

Use :func:`prepare_rate_series` before fitting or forecasting. The rules, in order:

1. The input must be a ``pd.Series`` on a tz-aware ``DatetimeIndex`` (any zone; converted to UTC).
   A naive index is refused: guessing the zone would shift the calendar silently.
2. Values must be numeric. ``NaN`` samples count as missing and are dropped (and counted);
   ``inf`` or negative rates are refused, naming the first offending timestamp.
3. Samples are sorted and averaged into ``bin_s`` bins aligned to the epoch (bin label = bin
   start). Any regular or irregular sampling step works; duplicate timestamps are averaged.
4. Runs of up to ``max_gap_bins`` empty bins are filled by linear interpolation between the bins
   either side; a longer run is refused, naming the gap's first and last missing bin.
5. Fewer than ``min_bins`` bins after repair is refused, naming both numbers.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from models.forecasting.types import ForecastInputError

__all__ = ["PreparedSeries", "prepare_rate_series"]


@dataclass(frozen=True)
class PreparedSeries:
    """A repaired series: ``values`` is float64 on a regular UTC index of ``bin_s`` steps, no NaN."""

    values: pd.Series
    bin_s: int
    dropped_nan: int
    interpolated_bins: int


def _check_index(series: object, where: str) -> pd.Series:
    if not isinstance(series, pd.Series):
        raise ForecastInputError(f"{where}: expected a pandas Series of rates, got {type(series).__name__}")
    if not isinstance(series.index, pd.DatetimeIndex):
        raise ForecastInputError(f"{where}: index must be a tz-aware DatetimeIndex (UTC), got {type(series.index).__name__}")
    if series.index.tz is None:
        raise ForecastInputError(f"{where}: index is tz-naive; localise it to UTC first (e.g. tz_localize('UTC'))")
    try:
        values = pd.to_numeric(series, errors="raise").astype("float64")
    except (TypeError, ValueError) as exc:
        raise ForecastInputError(f"{where}: values must be numeric rates (rec/s): {exc}") from None
    values.index = series.index.tz_convert("UTC")
    return values


def prepare_rate_series(
    series: pd.Series,
    *,
    bin_s: int = 60,
    max_gap_bins: int = 5,
    min_bins: int = 1,
    where: str = "rate series",
) -> PreparedSeries:
    """Repair ``series`` into regular ``bin_s`` bins following the module rules.

    ``where`` names the input in error messages (e.g. ``"features_1m job=demo input_rate"``).
    """
    if bin_s < 1:
        raise ValueError(f"bin_s must be >= 1 s, got {bin_s}")
    values = _check_index(series, where)
    nan_mask = values.isna()
    dropped = int(nan_mask.sum())
    values = values[~nan_mask]
    bad_inf = ~np.isfinite(values.to_numpy())
    if bad_inf.any():
        raise ForecastInputError(f"{where}: non-finite rate at {values.index[bad_inf][0].isoformat()}")
    bad_neg = values.to_numpy() < 0
    if bad_neg.any():
        i = int(np.argmax(bad_neg))
        raise ForecastInputError(
            f"{where}: negative rate {float(values.iloc[i])!r} at {values.index[i].isoformat()}; rates are rec/s >= 0"
        )
    if values.empty:
        raise ForecastInputError(f"{where}: no usable samples ({dropped} NaN dropped); need at least {min_bins} bins")
    values = values.sort_index()
    # origin="epoch" keeps bins aligned across calls, so history and forecasts line up.
    binned = values.resample(f"{bin_s}s", origin="epoch", label="left", closed="left").mean()
    missing = binned.isna().to_numpy()
    if missing.any():
        # Runs of consecutive missing bins: [start, end] positions, inclusive.
        starts = np.flatnonzero(missing & np.r_[True, ~missing[:-1]])
        ends = np.flatnonzero(missing & np.r_[~missing[1:], True])
        lengths = ends - starts + 1
        too_long = np.flatnonzero(lengths > max_gap_bins)
        if too_long.size:
            k = int(too_long[0])
            raise ForecastInputError(
                f"{where}: gap of {int(lengths[k])} missing {bin_s}s bins from {binned.index[starts[k]].isoformat()} "
                f"to {binned.index[ends[k]].isoformat()} exceeds the repair limit of {max_gap_bins} bins"
            )
        binned = binned.interpolate(method="linear", limit_area="inside")
    if len(binned) < min_bins:
        raise ForecastInputError(
            f"{where}: history too short: {len(binned)} bins of {bin_s}s "
            f"({binned.index[0].isoformat()} to {binned.index[-1].isoformat()}), need at least {min_bins}"
        )
    binned.index.freq = pd.tseries.frequencies.to_offset(f"{bin_s}s")
    return PreparedSeries(binned.astype("float64"), bin_s, dropped, int(missing.sum()))
