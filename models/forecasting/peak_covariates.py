"""Causal feature and target series for the darts peak models, on a fine input grid.

Use :func:`peak_covariates` for the past covariates (one row per input bin, from bins up to and
including it) and :func:`peak_targets` for the trailing targets (one row per input bin: the
``horizon_bins`` bin means that ended at it and their maximum, relative to the reference rate one
horizon earlier). :class:`~models.forecasting.darts_peak.DartsPeakForecaster` hands both to a darts
regression model whose output is shifted one horizon ahead, so "the target at ``t + horizon``" is
"the next window's bins and peak, seen from ``t``".

Shapes: ``values`` is a 1-D float array of ``input_bin_s`` bin means on a regular grid; ``bin_s``
(the forecast bins, a multiple of ``input_bin_s``) and ``horizon_bins`` are in forecast bins.
Both functions return ``(len(values), columns)`` float arrays with NaN where the history is too
short (the first :func:`context_input_bins` rows); rates are divided by ``scale``.

Why these columns (chosen by backtests on the real ADS trace and the twin's ysb/tsw traces):

- the reference is the last input bin, so a smooth real trace is read at its current value, not
  half a minute late as a minute mean would be;
- changes over 10 s to 30 min, and their positive parts: the next window's peak is the maximum of
  the path, so a rise lifts it and a fall does not. A linear quantile model needs the positive
  part to express that (trees find it themselves);
- mean absolute step over 30 s and 3 min (noise), the last minute's mean and the highest minute
  mean of the last 10 minutes against the reference (spikes), and the level.
"""

from __future__ import annotations

import numpy as np

__all__ = ["CHANGE_LAGS_S", "context_input_bins", "covariate_names", "peak_covariates", "peak_targets"]

#: Changes of the reference against the input bin this many seconds earlier.
CHANGE_LAGS_S: tuple[int, ...] = (10, 30, 60, 120, 300, 600, 1200, 1800)
_VOLATILITY_S: tuple[int, ...] = (30, 180)
_RECENT_MAX_BINS = 10


def _lag_bins(input_bin_s: int) -> list[int]:
    """Distinct change lags in input bins (at least one bin), in increasing order."""
    return sorted({max(1, lag // input_bin_s) for lag in CHANGE_LAGS_S})


def _vol_bins(input_bin_s: int) -> list[int]:
    return sorted({max(2, s // input_bin_s) for s in _VOLATILITY_S})


def covariate_names(input_bin_s: int) -> list[str]:
    """Column names of :func:`peak_covariates` at ``input_bin_s``."""
    lags = [f"{k * input_bin_s}s" for k in _lag_bins(input_bin_s)]
    return (
        [f"change_{s}" for s in lags]
        + [f"rise_{s}" for s in lags]
        + [f"volatility_{k * input_bin_s}s" for k in _vol_bins(input_bin_s)]
        + ["last_bin_mean", "max_recent_bin_mean", "level"]
    )


def context_input_bins(input_bin_s: int, bin_s: int) -> int:
    """Input bins of history a covariate row needs (the longest lag or the recent-max span)."""
    k = bin_s // input_bin_s
    return max(max(_lag_bins(input_bin_s)), max(_vol_bins(input_bin_s)), k * _RECENT_MAX_BINS) + 1


def _trailing_mean(y: np.ndarray, w: int) -> np.ndarray:
    """Mean of ``y[t - w + 1 .. t]`` at every ``t`` (NaN before ``w`` values exist)."""
    out = np.full(y.size, np.nan)
    if y.size >= w:
        c = np.concatenate([[0.0], np.cumsum(y)])
        out[w - 1 :] = (c[w:] - c[:-w]) / w
    return out


def _shift(x: np.ndarray, k: int) -> np.ndarray:
    """``x`` delayed by ``k`` rows (NaN in front)."""
    out = np.full(x.shape, np.nan)
    if k < x.shape[0]:
        out[k:] = x[: x.shape[0] - k]
    return out


def peak_covariates(values: np.ndarray, *, input_bin_s: int, bin_s: int, scale: float) -> np.ndarray:
    """Covariate rows, one per input bin, from bins up to and including it (module doc)."""
    if scale <= 0 or not np.isfinite(scale):
        raise ValueError(f"peak_covariates: scale must be a positive finite rate, got {scale!r}")
    if bin_s % input_bin_s:
        raise ValueError(f"peak_covariates: bin_s {bin_s} must be a multiple of input_bin_s {input_bin_s}")
    y = np.asarray(values, dtype="float64")
    k = bin_s // input_bin_s
    changes = [(y - _shift(y, lag)) / scale for lag in _lag_bins(input_bin_s)]
    rises = [np.maximum(c, 0.0) for c in changes]
    steps = np.abs(np.diff(y, prepend=np.nan))
    vols = [_trailing_mean(np.nan_to_num(steps), w) / scale for w in _vol_bins(input_bin_s)]
    for v, w in zip(vols, _vol_bins(input_bin_s)):
        v[:w] = np.nan  # the first step has no predecessor
    bin_mean = _trailing_mean(y, k)
    recent_max = np.max(np.stack([_shift(bin_mean, j * k) for j in range(_RECENT_MAX_BINS)]), axis=0)
    cols = changes + rises + vols + [(bin_mean - y) / scale, (recent_max - y) / scale, y / scale]
    out = np.stack(cols, axis=1)
    out[: context_input_bins(input_bin_s, bin_s) - 1] = np.nan
    return out


def peak_targets(values: np.ndarray, *, input_bin_s: int, bin_s: int, horizon_bins: int, scale: float) -> np.ndarray:
    """Trailing targets ``(len(values), horizon_bins + 1)``: per row ``t``, the ``horizon_bins``
    consecutive ``bin_s`` means ending at ``t`` and their max, minus the input bin one horizon
    before, over ``scale`` (NaN where that span does not exist)."""
    y = np.asarray(values, dtype="float64")
    k = bin_s // input_bin_s
    span = k * horizon_bins
    bin_mean = _trailing_mean(y, k)
    bins = np.stack([_shift(bin_mean, (horizon_bins - 1 - h) * k) for h in range(horizon_bins)], axis=1)
    ref = _shift(y, span)[:, None]
    rel = np.concatenate([bins, bins.max(axis=1, keepdims=True)], axis=1) - ref
    return rel / scale
