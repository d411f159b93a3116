"""Features of the recent past that the direct peak model reads: levels, changes, recent max, volatility.

Use :func:`window_features` to turn a regular series of bin means into one feature row per
forecast origin, and :func:`future_targets` for the matching training targets. Both express rates
relative to the last bin before the origin (``ref``) and divide by a fixed ``scale`` (the training
series' mean), so one model serves a job at any level and its targets are "how far above or below
the last bin the next bins (and their max) land".

Shapes: ``values`` is a 1-D float array of bin means, ``ends`` an int array of origin positions
(the origin is bin ``ends[i]``; bins ``< ends[i]`` are history). Every end needs
:data:`CONTEXT_BINS` bins before it. Calendar columns (minute-of-day sine and cosine) are added
when ``minute_of_day`` is given: one value per origin, the origin's minute of the day.
"""

from __future__ import annotations

import numpy as np

__all__ = ["CONTEXT_BINS", "FEATURE_NAMES", "future_targets", "window_features"]

#: Changes of the last bin against the bin ``k`` bins before it.
_LAGS: tuple[int, ...] = (1, 2, 3, 5, 10, 20, 30)
#: Bins of history a feature row needs (the longest lag, plus one for the 30-bin volatility).
CONTEXT_BINS = 31
FEATURE_NAMES: tuple[str, ...] = (
    *(f"change_{k}" for k in _LAGS),
    "max10_above_last",
    "volatility_10",
    "volatility_30",
    "level",
)


def window_features(values: np.ndarray, ends: np.ndarray, scale: float, minute_of_day: np.ndarray | None = None) -> np.ndarray:
    """Feature matrix ``(len(ends), len(FEATURE_NAMES) [+ 2 calendar columns])``, see module doc.

    ``level`` (last bin / scale) stays in: on the twin's periodic trace it tells rising from
    falling phases; the other columns are changes, so they carry over between levels.
    """
    y = np.asarray(values, dtype="float64")
    ends = np.asarray(ends, dtype=np.int64)
    if scale <= 0 or not np.isfinite(scale):
        raise ValueError(f"window_features: scale must be a positive finite rate, got {scale!r}")
    if ends.size and (ends.min() < CONTEXT_BINS or ends.max() > y.size):
        raise ValueError(
            f"window_features: origins need {CONTEXT_BINS} bins of history inside the "
            f"{y.size}-bin series, got positions {int(ends.min())}..{int(ends.max())}"
        )
    ref = y[ends - 1]
    cols = [(ref - y[ends - 1 - k]) / scale for k in _LAGS]
    absdiff = np.abs(np.diff(y))  # absdiff[i] = |y[i+1] - y[i]|
    csum = np.concatenate([[0.0], np.cumsum(absdiff)])
    last10 = np.stack([y[ends - j] for j in range(1, 11)], axis=1)
    cols.append((last10.max(axis=1) - ref) / scale)
    # Mean absolute step over the last 10 and 30 steps (steps ending at bin end-1).
    cols.append((csum[ends - 1] - csum[ends - 11]) / 10 / scale)
    cols.append((csum[ends - 1] - csum[ends - 31]) / 30 / scale)
    cols.append(ref / scale)
    if minute_of_day is not None:
        angle = 2 * np.pi * np.asarray(minute_of_day, dtype="float64") / 1440.0
        cols += [np.sin(angle), np.cos(angle)]
    return np.stack(cols, axis=1)


def future_targets(values: np.ndarray, ends: np.ndarray, horizon_bins: int, scale: float) -> np.ndarray:
    """Training targets ``(len(ends), horizon_bins + 1)``: each next bin, then their max, minus ref, / scale."""
    y = np.asarray(values, dtype="float64")
    ends = np.asarray(ends, dtype=np.int64)
    if ends.size and ends.max() + horizon_bins > y.size:
        raise ValueError(f"future_targets: origin {int(ends.max())} lacks {horizon_bins} bins of truth in {y.size}")
    ahead = np.stack([y[ends + h] for h in range(horizon_bins)], axis=1)
    ref = y[ends - 1][:, None]
    return np.concatenate([ahead - ref, ahead.max(axis=1, keepdims=True) - ref], axis=1) / scale
