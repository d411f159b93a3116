"""Calibrate a cluster profile from profiling observations (the core of ``flinktune twin calibrate``).

Use :func:`calibrate` with a ``PROFILING_COLUMNS``-like table (real or simulated runs) and a
starting profile: it fits a few identifiable parameters by least squares on the twin's analytic
steady state (:func:`flinktune.twin.mechanics.steady_state`) and reports, on held-out runs, the
throughput MAPE, the recovery MAPE and the latency-class accuracy (a latency is "bad" when it is
at least :data:`BAD_LATENCY_FACTOR` times the lowest latency seen at that rate, Demeter's
boundary). :func:`evaluate` gives the same scores for any profile.

Residuals, one set per run: relative error of throughput and CPU used (CPU pins the per-record
cost even below saturation), log error of latency and recovery time (both heavy tailed).
Parameters are fitted in log space within bounds; ``cost_scale`` scales every vertex's cost.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
from scipy.optimize import least_squares

from flinktune.config_space import KNOBS, Configuration
from flinktune.limits import LimitError, check_knobs, check_rate
from flinktune.twin.mechanics import RECOVERY_CAP_S, steady_state
from flinktune.twin.profile import ClusterProfile
from flinktune.twin.profiling import overload_horizon_s

__all__ = [
    "BAD_LATENCY_FACTOR",
    "EXTRA_FIT_PARAMS",
    "FIT_PARAMS",
    "PARAM_BOUNDS",
    "CalibrationError",
    "CalibrationResult",
    "apply_params",
    "calibrate",
    "evaluate",
    "predict_table",
    "read_observations",
]

#: Parameters fitted by default and their (low, high) bounds.
FIT_PARAMS: dict[str, tuple[float, float]] = {
    # Wide: the local benchmark job costs ~1/15 of the built-in profiles' record (59k rec/s per core).
    "cost_scale": (0.02, 5.0),
    "extra_core_efficiency": (0.05, 1.0),
    "queue_ms": (1.0, 1000.0),
    "base_latency_ms": (1.0, 2000.0),
    "failure_detection_s": (0.1, 300.0),  # a killed local TaskManager is noticed in ~0.5 s
    "gc_slowdown": (0.01, 20.0),
}
#: Further parameters that may be named in ``params`` (not fitted unless asked): contention of
#: slots sharing a core, which real runs with several slots per core show.
EXTRA_FIT_PARAMS: dict[str, tuple[float, float]] = {
    "shared_core_knee": (0.05, 1.0),
    "shared_core_exponent": (0.01, 3.0),
    "restart_base_s": (0.1, 200.0),
    "checkpoint_async_overhead": (0.001, 0.5),
    "task_base_mb": (1.0, 400.0),
    "tm_overhead_mb": (50.0, 900.0),
}
#: Bounds of every parameter calibration can fit (low, high).
PARAM_BOUNDS = {**FIT_PARAMS, **EXTRA_FIT_PARAMS}
#: A latency at least this many times the lowest at the same rate is "bad" (4 ** atanh(0.5)).
BAD_LATENCY_FACTOR = 2.14
_SCORES = ("throughput_mape", "recovery_mape", "latency_class_accuracy")
_NEEDED = (*KNOBS, "input_rate", "throughput", "latency_ms", "recovery_s")
#: Columns that may be empty per row: recovery is only measured when a failure was injected, a
#: failure run has no steady latency, and CPU used is not in every observation table (each is
#: fitted and scored only where present).
_MAY_BE_EMPTY = ("recovery_s", "cpu_used", "latency_ms")


class CalibrationError(ValueError):
    """The observations cannot be used; the message names the column or row."""


@dataclass(frozen=True)
class CalibrationResult:
    """The calibrated profile, the fitted values and the scores on training and held-out runs."""

    profile: ClusterProfile
    params: dict[str, float]
    train: dict[str, float]
    holdout: dict[str, float]
    n_train: int
    n_holdout: int
    extra: dict[str, object] = field(default_factory=dict)

    def summary(self) -> str:
        fitted = ", ".join(f"{k}={v:.4g}" for k, v in self.params.items())
        h = self.holdout

        def pct(key: str, absent: str) -> str:  # a score without data says so, never "nan%"
            v = h[key]
            return f"{v:.1%}" if np.isfinite(v) else absent

        return (
            f"fitted {fitted} on {self.n_train} runs; held-out ({self.n_holdout} runs): throughput MAPE "
            f"{pct('throughput_mape', 'n/a')}, recovery MAPE {pct('recovery_mape', 'n/a (no recovery_s measured)')}, "
            f"latency-class accuracy {pct('latency_class_accuracy', 'n/a')}"
        )


def apply_params(profile: ClusterProfile, params: dict[str, float]) -> ClusterProfile:
    """A copy of ``profile`` with fitted values; ``cost_scale`` multiplies every vertex's ``cost_us``."""
    changes: dict[str, Any] = {k: float(v) for k, v in params.items() if k != "cost_scale"}
    if "cost_scale" in params:
        flow = profile.dataflow
        vertices = tuple(v.model_copy(update={"cost_us": v.cost_us * float(params["cost_scale"])}) for v in flow.vertices)
        changes["dataflow"] = flow.model_copy(update={"vertices": vertices}).model_dump()
    return profile.with_(**changes)


def _check(obs: pd.DataFrame) -> pd.DataFrame:
    missing = [c for c in _NEEDED if c not in obs.columns]
    if missing:
        raise CalibrationError(f"observations: missing column(s) {missing}")
    if len(obs) < 3:
        raise CalibrationError(f"observations: need at least 3 runs, got {len(obs)}")
    cols = list(_NEEDED) + (["cpu_used"] if "cpu_used" in obs.columns else [])
    num = obs[cols].apply(pd.to_numeric, errors="coerce")
    for col in cols:
        values = num[col]
        bad = ~np.isfinite(values) | (values < 0)
        if col in _MAY_BE_EMPTY:
            # empty is allowed, but text that is not a number, infinities and negatives are not
            bad = (values.isna() & obs[col].notna() & (obs[col].astype(str).str.strip() != "")) | np.isinf(values) | (values < 0)
        if bad.any():
            row = int(np.flatnonzero(bad.to_numpy())[0])
            raise CalibrationError(
                f"observations: column {col!r} row {row} is missing, negative or not a number ({obs[col].iloc[row]!r})"
            )
    if "cpu_used" not in num.columns:
        num["cpu_used"] = np.nan
    return num.reset_index(drop=True)


def _mape(pred: np.ndarray, obs: np.ndarray) -> float:
    ok = np.isfinite(obs)
    if not ok.any():
        return float("nan")
    return float(np.mean(np.abs(pred[ok] - obs[ok]) / np.maximum(obs[ok], 1e-9)))


def _predict(profile: ClusterProfile, obs: pd.DataFrame, horizon_s: float) -> dict[str, np.ndarray]:
    out = {k: np.empty(len(obs)) for k in ("throughput", "latency_ms", "recovery_s", "cpu_used")}
    keys = obs[list(KNOBS)].astype(float).apply(tuple, axis=1)
    for key, idx in keys.groupby(keys).groups.items():
        cfg = Configuration.from_dict(dict(zip(KNOBS, key)))
        pos = np.asarray(obs.index.get_indexer(idx))
        ss = steady_state(profile, cfg, obs["input_rate"].to_numpy()[pos], horizon_s=horizon_s)
        for k in out:
            out[k][pos] = ss[k]
    return out


def _rate_groups(rates: np.ndarray, tol: float = 0.03) -> np.ndarray:
    # Runs at the same nominal rate differ by generator jitter: group rates within tol of a group's first.
    group = np.empty(rates.size, dtype=np.int64)
    g, first = -1, 0.0
    for i in np.argsort(rates):
        if g < 0 or rates[i] > first * (1 + tol):
            g, first = g + 1, rates[i]
        group[i] = g
    return group


def _latency_classes(lat: np.ndarray, groups: np.ndarray) -> np.ndarray:
    lowest = pd.Series(lat).groupby(groups).transform("min").to_numpy()
    return lat >= BAD_LATENCY_FACTOR * lowest


def evaluate(profile: ClusterProfile, observations: pd.DataFrame, *, duration_s: int = 300) -> dict[str, float]:
    """Scores of ``profile`` on observations: throughput and recovery MAPE, latency-class accuracy.

    ``duration_s`` is the profiling runs' measured length (sets the overload horizon).
    """
    obs = _check(observations)
    pred = _predict(profile, obs, overload_horizon_s(duration_s))
    thr = obs["throughput"].to_numpy()
    rec = np.minimum(obs["recovery_s"].to_numpy(), RECOVERY_CAP_S)
    groups = _rate_groups(obs["input_rate"].to_numpy())
    lat = obs["latency_ms"].to_numpy()
    has_lat = np.isfinite(lat)
    classes_obs = _latency_classes(lat[has_lat], groups[has_lat])
    classes_pred = _latency_classes(pred["latency_ms"][has_lat], groups[has_lat])
    return {
        "throughput_mape": _mape(pred["throughput"], thr),
        "recovery_mape": _mape(pred["recovery_s"], rec),
        "latency_class_accuracy": float(np.mean(classes_obs == classes_pred)) if has_lat.any() else float("nan"),
    }


def calibrate(
    observations: pd.DataFrame,
    base: ClusterProfile,
    *,
    params: Sequence[str] | None = None,
    holdout: float = 0.25,
    seed: int = 0,
    duration_s: int = 300,
) -> CalibrationResult:
    """Fit ``params`` (default :data:`FIT_PARAMS`) of ``base`` to the observations' training split.

    ``holdout`` is the share of runs kept out of the fit and scored; ``duration_s`` the profiling
    runs' length (as given to ``profile_configs``).
    """
    names = list(params or FIT_PARAMS)
    unknown = [p for p in names if p not in PARAM_BOUNDS]
    if unknown:
        raise CalibrationError(f"cannot fit parameter(s) {unknown}; fittable: {sorted(PARAM_BOUNDS)}")
    obs = _check(observations)
    if not 0 <= holdout < 1:
        raise CalibrationError(f"holdout must be in [0, 1), got {holdout}")
    rng = np.random.default_rng(seed)
    n_test = int(round(holdout * len(obs)))
    perm = rng.permutation(len(obs))
    test, train = obs.iloc[perm[:n_test]].reset_index(drop=True), obs.iloc[perm[n_test:]].reset_index(drop=True)
    start = {p: (1.0 if p == "cost_scale" else float(getattr(base, p))) for p in names}
    if "shared_core_knee" in start and start["shared_core_knee"] <= 0:
        start["shared_core_knee"] = 0.5  # off in the base profile: start the search inside the range
    lo = np.log([PARAM_BOUNDS[p][0] for p in names])
    hi = np.log([PARAM_BOUNDS[p][1] for p in names])
    x0 = np.clip(np.log([max(start[p], 1e-9) for p in names]), lo + 1e-9, hi - 1e-9)
    y_thr, y_cpu = train["throughput"].to_numpy(), train["cpu_used"].to_numpy()
    y_lat = np.log(np.maximum(train["latency_ms"].to_numpy(), 1e-3))
    rec = np.minimum(train["recovery_s"].to_numpy(), RECOVERY_CAP_S)
    y_rec = np.log(np.maximum(rec, 1.0))

    horizon = overload_horizon_s(duration_s)

    has_cpu, has_rec, has_lat = np.isfinite(y_cpu), np.isfinite(y_rec), np.isfinite(y_lat)

    def residuals(x: np.ndarray) -> np.ndarray:
        prof = apply_params(base, dict(zip(names, np.exp(x))))
        p = _predict(prof, train, horizon)
        return np.concatenate(
            [
                (p["throughput"] - y_thr) / np.maximum(y_thr, 1e-9),
                ((p["cpu_used"] - y_cpu) / np.maximum(y_cpu, 1e-9))[has_cpu],
                (np.log(np.maximum(p["latency_ms"], 1e-3)) - y_lat)[has_lat],
                (np.log(np.maximum(np.minimum(p["recovery_s"], RECOVERY_CAP_S), 1.0)) - y_rec)[has_rec],
            ]
        )

    fit = least_squares(residuals, x0, bounds=(lo, hi), x_scale=1.0, diff_step=1e-3, max_nfev=200)
    fitted = {p: float(v) for p, v in zip(names, np.exp(fit.x))}
    profile = apply_params(base, fitted)
    return CalibrationResult(
        profile=profile,
        params=fitted,
        train=evaluate(profile, train, duration_s=duration_s),
        holdout=evaluate(profile, test, duration_s=duration_s) if n_test >= 3 else dict.fromkeys(_SCORES, float("nan")),
        n_train=len(train),
        n_holdout=n_test,
        extra={"cost": float(fit.cost), "nfev": int(fit.nfev), "status": int(fit.status)},
    )


def read_observations(path: str) -> pd.DataFrame:
    """Read an observations CSV (``,`` or ``|`` separated); errors name the file."""
    try:
        with open(path) as fh:
            head = fh.readline()
        df = pd.read_csv(path, sep="|" if head.count("|") > head.count(",") else ",")
    except (OSError, pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as exc:
        raise CalibrationError(f"{path}: cannot read observations: {exc}") from None
    try:
        _check_knobs(df)
        _check_limits(df)
    except (CalibrationError, LimitError) as exc:
        raise CalibrationError(f"{path}: {exc}") from None
    return df


def _check_limits(df: pd.DataFrame) -> None:
    """Every row's knobs and rate within physical limits (parallelism 0 or 1e12 would fit nothing)."""
    for i, row in enumerate(df[[*KNOBS, "input_rate"]].to_dict("records")):
        check_knobs(row, f"row {i}")  # 0-based data row, as the file's other errors count them
        check_rate(row["input_rate"], f"row {i}: input_rate")


def _check_knobs(df: pd.DataFrame) -> None:
    missing = [c for c in (*KNOBS, "input_rate") if c not in df.columns]
    if missing:
        raise CalibrationError(f"missing column(s) {missing}; present: {list(df.columns)}")


def predict_table(profile: ClusterProfile, table: pd.DataFrame, *, duration_s: int = 300) -> pd.DataFrame:
    """Predict throughput, p95 latency, recovery time and CPU used for rows of knobs + ``input_rate``.

    Returns the knob and rate columns with ``throughput``, ``latency_ms``, ``recovery_s`` and
    ``cpu_used`` filled from the twin's steady state (what ``flinktune twin predict`` prints).
    """
    _check_knobs(table)
    rows = table[[*KNOBS, "input_rate"]].apply(pd.to_numeric, errors="coerce")
    bad = rows.isna().any(axis=1) | (rows < 0).any(axis=1)
    if bad.any():
        i = int(np.flatnonzero(bad.to_numpy())[0])
        raise CalibrationError(f"row {i}: knobs and input_rate must be non-negative numbers, got {table.iloc[i].to_dict()}")
    for i, r in rows.iterrows():
        try:
            Configuration.from_dict({k: r[k] for k in KNOBS}, where=f"row {i}")
        except ValueError as exc:
            raise CalibrationError(str(exc)) from None
    pred = _predict(profile, rows.reset_index(drop=True), overload_horizon_s(duration_s))
    out = rows.reset_index(drop=True).copy()
    for k in ("throughput", "latency_ms", "recovery_s", "cpu_used"):
        out[k] = pred[k]
    return out
