"""Training data for surrogates: checks, repair rules and the model-space transform, shared by every GP.

Use :func:`prepare_training_data` in any surrogate's ``fit`` (``GPSurrogate`` now, an RGPE
ensemble later) so that all of them read observations the same way. Shapes: ``X`` (n, d) knobs
normalised to [0, 1], ``rates`` (n,) rec/s, ``Y`` (n, len(outcomes)) in each outcome's own unit.

Rules, in order:

1. Shapes must agree; knobs must lie in [0, 1]; otherwise :class:`SurrogateInputError`.
2. A row with a NaN or infinite knob or rate, or a negative rate, is dropped for every outcome; a
   NaN, infinite or negative outcome value drops the row for that outcome only. Drops are
   counted per outcome and reported once with a :class:`SurrogateDataWarning`.
3. Outcomes in :data:`LOG_OUTCOMES` are modelled as ``log(max(y, log_floor))`` (a zero latency or
   recovery time is floored, not dropped).
4. Rows with the same knobs and rate are averaged in model space (repeated profiling runs).
5. An outcome with fewer than ``min_points`` (3) distinct points raises, naming the outcome.
6. The model input is ``[X, rate / rate_scale]`` with ``rate_scale = max observed rate x 1.5``
   (stored with the model so prediction scales the same way and higher rates stay near [0, 1]).
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field

import numpy as np

from models.surrogate.types import LOG_OUTCOMES, SurrogateDataWarning, SurrogateInputError

__all__ = ["RATE_SCALE_FACTOR", "OutcomeData", "TrainingData", "check_knobs", "model_inputs", "prepare_training_data"]

RATE_SCALE_FACTOR = 1.5
MIN_POINTS = 3


@dataclass(frozen=True)
class OutcomeData:
    """Model-space training set of one outcome: ``x`` (m, d + 1) and ``y`` (m,), duplicates averaged."""

    x: np.ndarray
    y: np.ndarray
    dropped: int
    merged: int

    @property
    def constant(self) -> bool:
        return bool(np.ptp(self.y) < 1e-12)


@dataclass(frozen=True)
class TrainingData:
    """Per-outcome training sets plus the rate scale they were built with."""

    outcomes: tuple[str, ...]
    rate_scale: float
    d: int
    per_outcome: dict[str, OutcomeData] = field(default_factory=dict)


def _as_2d(name: str, a: object) -> np.ndarray:
    arr = np.asarray(a, dtype="float64")
    if arr.ndim != 2:
        raise SurrogateInputError(f"{name} must be 2-D (n, columns), got shape {arr.shape}")
    return arr


def check_knobs(X: np.ndarray, *, name: str = "X") -> np.ndarray:
    """``X`` as float64 (n, d) in [0, 1]; NaN passes (handled by the caller), out-of-range raises."""
    X = _as_2d(name, X)
    bad = (X < -1e-9) | (X > 1 + 1e-9)
    if bad.any():
        r, c = map(int, np.argwhere(bad)[0])
        raise SurrogateInputError(f"{name}[{r}, {c}] = {float(X[r, c])!r} is outside [0, 1]; knobs must be normalised")
    return X


def model_inputs(X: np.ndarray, rates: np.ndarray, rate_scale: float) -> np.ndarray:
    """The GP input ``[X, rate / rate_scale]``, shape (n, d + 1)."""
    return np.column_stack([X, np.asarray(rates, dtype="float64") / rate_scale])


def _dedup(x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray, int]:
    keys, inverse = np.unique(np.round(x, 12), axis=0, return_inverse=True)
    inverse = inverse.ravel()
    sums = np.bincount(inverse, weights=y, minlength=len(keys))
    counts = np.bincount(inverse, minlength=len(keys))
    return keys, sums / counts, int(len(x) - len(keys))


def prepare_training_data(
    X: np.ndarray,
    rates: np.ndarray,
    Y: np.ndarray,
    outcomes: tuple[str, ...],
    *,
    log_floor: float = 1e-3,
    min_points: int = MIN_POINTS,
) -> TrainingData:
    """Apply the module rules; returns model-space data per outcome."""
    X = check_knobs(X)
    rates = np.asarray(rates, dtype="float64").reshape(-1)
    Y = _as_2d("Y", Y)
    n, d = X.shape
    if rates.shape[0] != n or Y.shape[0] != n:
        raise SurrogateInputError(f"row counts differ: X has {n}, rates {rates.shape[0]}, Y {Y.shape[0]}")
    if Y.shape[1] != len(outcomes):
        raise SurrogateInputError(f"Y has {Y.shape[1]} columns, expected {len(outcomes)} for outcomes {outcomes}")
    row_ok = np.isfinite(X).all(axis=1) & np.isfinite(rates) & (rates >= 0)
    if not row_ok.any():
        raise SurrogateInputError(f"no usable rows: all {n} rows have a NaN/inf knob or a bad rate")
    rate_scale = float(rates[row_ok].max()) * RATE_SCALE_FACTOR
    if rate_scale <= 0:
        raise SurrogateInputError("all observed rates are 0; cannot scale the rate input")
    x_all = model_inputs(np.where(row_ok[:, None], X, 0.0), np.where(row_ok, rates, 0.0), rate_scale)
    per: dict[str, OutcomeData] = {}
    notes = []
    for j, name in enumerate(outcomes):
        y = Y[:, j]
        ok = row_ok & np.isfinite(y) & (y >= 0)
        dropped = int(n - ok.sum())
        yj = y[ok]
        if name in LOG_OUTCOMES:
            yj = np.log(np.maximum(yj, log_floor))
        xu, yu, merged = _dedup(x_all[ok], yj)
        if len(yu) < min_points:
            raise SurrogateInputError(
                f"outcome {name!r}: {len(yu)} distinct usable point(s) after dropping {dropped} bad row(s) "
                f"and merging {merged} duplicate(s); need at least {min_points}"
            )
        per[name] = OutcomeData(xu, yu, dropped, merged)
        if dropped:
            notes.append(f"{name}: {dropped}")
    if notes:
        warnings.warn(
            f"surrogate training data: dropped rows with NaN/inf/negative values ({', '.join(notes)} of {n})",
            SurrogateDataWarning,
            stacklevel=3,
        )
    return TrainingData(tuple(outcomes), rate_scale, d, per)
