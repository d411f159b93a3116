"""The grey-box twin: the mechanistic steady state times a learned correction, fitted on real profiling runs.

Use :func:`fit_grey_box` on a table in the ``profiling_runs.csv`` format (Demeter's real runs or
any job's: the five knobs, ``input_rate``, ``throughput``, ``latency_ms``, ``recovery_s``, and a
grouping column such as ``run``), :meth:`GreyBoxTwin.predict` for any table of knobs and rates,
and :func:`flinktune.calibration.grey_box_scores.cross_validate` for leave-one-group-out scores
(``flinktune twin calibrate --group-by run``).

Which part is which:

- Mechanism (:mod:`flinktune.twin.mechanics`, fitted stage by stage by censoring-aware least
  squares in :func:`fit_mechanism`): capacity from cores per slot with slot-sharing
  contention (``shared_core_knee``/``shared_core_exponent``), memory pressure (GC), checkpoint
  pauses and parallelism overheads; latency from queueing and lag; recovery from downtime, replay
  and catch-up. This is what the replay simulator runs on.
- Learned correction (gradient-boosted trees on the knobs, derived layout features, the rate and
  the mechanism's own predictions): capacity as a censored log-ratio to the mechanism's capacity
  (:mod:`flinktune.calibration.capacity_correction`; throughput = min(kept ratio x rate, capacity) with a
  10 %/90 % band, so the keeps-up class follows from the capacity), the latency class and
  level, the recovery class (at most ``recovery_limit_s``) and the recovery time below the profiler's cap.
  Real profiling runs show effects the mechanism does not (throughputs up to 2.6x the recorded
  rate, which we read as a profiling job draining a backlog; ``input_rate`` is only approximated by
  the production job's throughput; failures that never recover before the profiler's cap), so the
  correction learns those.

Censoring: a recovery at or above ``recovery_cap_s`` (360 s for Demeter's profiler) means "did
not recover before the cap"; it counts as a slow recovery in the class model and is left out of
the recovery-time regression (its true value is unknown). An empty recovery means "not measured"
and is used for every other target.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from flinktune.calibration.capacity_correction import boosted_trees, fit_capacity_correction
from flinktune.calibration.mechanism import PARAM_BOUNDS, CalibrationError, apply_params
from flinktune.config_space import KNOBS, Configuration
from flinktune.signing import SignatureError, read_signed, write_signed
from flinktune.twin.mechanics import steady_state
from flinktune.twin.profile import ClusterProfile
from flinktune.twin.profiling import overload_horizon_s

__all__ = [
    "GOOD_LATENCY_FACTOR",
    "KEEPS_UP_FACTOR",
    "MECHANISM_STAGES",
    "GreyBoxTwin",
    "check_profiling_runs",
    "fit_grey_box",
    "fit_mechanism",
]

#: A run keeps up when its throughput is at least this share of the input rate.
KEEPS_UP_FACTOR = 0.95
#: A latency is good when at most this many times the fit runs' 10th-percentile latency.
GOOD_LATENCY_FACTOR = 3.0
_TARGETS = ("throughput", "latency_ms", "recovery_s")


def check_profiling_runs(
    obs: pd.DataFrame, *, group_by: str | None = None, where: str = "profiling runs"
) -> tuple[pd.DataFrame, list[str]]:
    """Validate and clean a profiling table; returns (clean table, notes on what was changed).

    Raises :class:`CalibrationError` naming the column and row for a missing column, a knob or
    rate that is not a positive number, a negative or non-numeric measurement, or a table with
    fewer than 3 rows. Exact duplicate rows are dropped (one measurement, logged twice) and said
    in the notes. Empty ``recovery_s``/``latency_ms`` are kept (not measured).
    """
    needed = [*KNOBS, "input_rate", *_TARGETS] + ([group_by] if group_by else [])
    missing = [c for c in needed if c not in obs.columns]
    if missing:
        raise CalibrationError(f"{where}: missing column(s) {missing}; present: {list(obs.columns)}")
    notes: list[str] = []
    dup = obs.duplicated(subset=needed)
    if dup.any():
        notes.append(f"dropped {int(dup.sum())} exact duplicate row(s) (first at row {int(np.flatnonzero(dup.to_numpy())[0])})")
        obs = obs[~dup]
    num = obs[[*KNOBS, "input_rate", *_TARGETS]].apply(pd.to_numeric, errors="coerce")
    for col in (*KNOBS, "input_rate", "throughput"):
        bad = ~np.isfinite(num[col]) | (num[col] <= 0)
        if bad.any():
            i = int(np.flatnonzero(bad.to_numpy())[0])
            raise CalibrationError(
                f"{where}: column {col!r} row {obs.index[i]} must be a positive number, got {obs[col].iloc[i]}"
            )
    for col in ("latency_ms", "recovery_s"):
        text = obs[col].astype(str).str.strip()
        bad = (
            (num[col].isna() & obs[col].notna() & (text != "") & (text.str.lower() != "nan"))
            | np.isinf(num[col])
            | (num[col] < 0)
        )
        if bad.any():
            i = int(np.flatnonzero(bad.to_numpy())[0])
            raise CalibrationError(
                f"{where}: column {col!r} row {obs.index[i]} must be empty or a non-negative number, got {obs[col].iloc[i]!r:.40}"
            )
    if len(num) < 3:
        raise CalibrationError(f"{where}: need at least 3 rows, got {len(num)}")
    if num["throughput"].notna().sum() and not num["recovery_s"].notna().any():
        notes.append("no recovery measured: recovery models are not fitted")
    if group_by:
        num[group_by] = obs[group_by].astype(str).to_numpy()
    return num.reset_index(drop=True), notes


def _features(table: pd.DataFrame, mech: dict[str, np.ndarray]) -> np.ndarray:
    cps = table["cpu"] / table["task_slots"]
    tms = np.ceil(table["parallelism"] / table["task_slots"])
    rate = table["input_rate"].to_numpy(float)
    cols = [
        *(table[k].to_numpy(float) for k in KNOBS),
        cps.to_numpy(float),
        tms.to_numpy(float),
        (tms * table["cpu"]).to_numpy(float),
        (table["memory_mb"] / table["task_slots"]).to_numpy(float),
        np.log(rate),
        np.log(np.maximum(mech["capacity"], 1.0) / rate),
        np.log(np.maximum(mech["latency_ms"], 1e-3)),
        np.log(np.maximum(mech["recovery_s"], 1.0)),
    ]
    return np.column_stack(cols)


def _mechanism(profile: ClusterProfile, table: pd.DataFrame, horizon_s: float) -> dict[str, np.ndarray]:
    keys = ("capacity", "throughput", "latency_ms", "recovery_s", "cpu_used")
    out = {k: np.empty(len(table)) for k in keys}
    knobs = table[list(KNOBS)].astype(float)
    rates = table["input_rate"].to_numpy(float)
    for key, idx in knobs.groupby(list(KNOBS)).groups.items():
        pos = table.index.get_indexer(idx)
        cfg = Configuration.from_dict(dict(zip(KNOBS, key)))
        ss = steady_state(profile, cfg, rates[pos], horizon_s=horizon_s)
        for k in keys:
            out[k][pos] = ss[k]
    return out


def _gbc(seed: int = 0) -> Any:
    from sklearn.ensemble import GradientBoostingClassifier

    return GradientBoostingClassifier(n_estimators=100, max_depth=2, learning_rate=0.1, subsample=0.8, random_state=seed)


class _Constant:
    """Stands in for a classifier when the fit data has one class only (predicts it)."""

    def __init__(self, value: bool) -> None:
        self.value = value

    def predict_proba(self, x: np.ndarray) -> np.ndarray:
        p = np.full(len(x), 1.0 if self.value else 0.0)
        return np.column_stack([1 - p, p])


def _classifier(x: np.ndarray, y: np.ndarray, seed: int) -> Any:
    if y.all() or not y.any():
        return _Constant(bool(y.all()) if y.size else False)
    return _gbc(seed).fit(x, y)


@dataclass
class GreyBoxTwin:
    """A fitted grey-box twin: ``profile`` is the mechanism, the rest the learned correction.

    ``good_latency_ms`` is the latency-class boundary (``GOOD_LATENCY_FACTOR`` x the fit runs'
    10th-percentile latency); ``recovery_cap_s`` the profiler's cap; ``recovery_limit_s`` the
    recovery-class boundary.
    """

    profile: ClusterProfile
    params: dict[str, float]
    good_latency_ms: float
    recovery_cap_s: float
    recovery_limit_s: float
    duration_s: int
    models: dict[str, Any] = field(repr=False)
    notes: list[str] = field(default_factory=list)

    def predict(self, table: pd.DataFrame) -> pd.DataFrame:
        """Predictions for rows of knobs + ``input_rate`` (one output row per input row).

        Columns: the mechanism's ``mech_throughput``, ``mech_latency_ms``, ``mech_recovery_s``;
        the corrected ``capacity`` and ``throughput`` (= min(kept ratio x rate, capacity)) with
        ``throughput_lo``/``throughput_hi`` (10 %/90 %),
        ``keeps_up`` (throughput >= 0.95 x rate), ``latency_ms``, ``p_latency_good``/``latency_good``,
        ``recovery_s`` (below the cap), ``p_recovers``/``recovers`` (within the limit).
        """
        rows = table[[*KNOBS, "input_rate"]].apply(pd.to_numeric, errors="coerce").reset_index(drop=True)
        if rows.isna().any().any() or (rows <= 0).any().any():
            i = int(np.flatnonzero((rows.isna() | (rows <= 0)).any(axis=1).to_numpy())[0])
            raise CalibrationError(f"row {i}: knobs and input_rate must be positive numbers, got {table.iloc[i].to_dict()}")
        mech = _mechanism(self.profile, rows, overload_horizon_s(self.duration_s))
        x = _features(rows, mech)
        rate = rows["input_rate"].to_numpy(float)
        m = self.models
        out = rows.copy()
        out["mech_throughput"] = mech["throughput"]
        out["mech_latency_ms"] = mech["latency_ms"]
        out["mech_recovery_s"] = mech["recovery_s"]
        for k, v in m["thr"].throughput(x, mech["capacity"], rate).items():
            out[k] = v
        # The class follows the throughput prediction (a separate classifier scored lower when
        # left out by run: the class boundary sits inside the measurement noise of the rate).
        out["keeps_up"] = out["throughput"] >= KEEPS_UP_FACTOR * rate
        out["latency_ms"] = np.exp(np.log(np.maximum(mech["latency_ms"], 1e-3)) + m["lat"].predict(x))
        out["p_latency_good"] = m["lat_good"].predict_proba(x)[:, 1]
        out["latency_good"] = out["p_latency_good"] >= 0.5
        if "rec" in m:
            out["recovery_s"] = np.minimum(np.exp(m["rec"].predict(x)), self.recovery_cap_s)
            out["p_recovers"] = m["rec_ok"].predict_proba(x)[:, 1]
            out["recovers"] = out["p_recovers"] >= 0.5
        return out

    def save(self, path: str | Path) -> Path:
        """Write the whole fitted twin (mechanism and correction) to one signed file (joblib)."""
        import io

        import joblib

        buffer = io.BytesIO()
        joblib.dump(self, buffer)
        return write_signed(path, buffer.getvalue())

    @staticmethod
    def load(path: str | Path) -> GreyBoxTwin:
        """Read a file written by :meth:`save`; a clear error when it is something else."""
        import io

        import joblib

        # The signature is checked before joblib (a pickle) runs anything in the file.
        try:
            payload = read_signed(path, "grey-box twin file")
        except (OSError, SignatureError) as exc:
            raise CalibrationError(str(exc)) from None
        try:
            obj = joblib.load(io.BytesIO(payload))
        except Exception as exc:
            raise CalibrationError(f"{path}: not a grey-box twin file: {exc}") from None
        if not isinstance(obj, GreyBoxTwin):
            raise CalibrationError(f"{path}: not a grey-box twin file (holds {type(obj).__name__})")
        return obj


def fit_grey_box(
    observations: pd.DataFrame,
    base: ClusterProfile,
    *,
    recovery_cap_s: float = 360.0,
    recovery_limit_s: float = 180.0,
    duration_s: int = 240,
    seed: int = 0,
    max_nfev: int = 60,
) -> GreyBoxTwin:
    """Fit the mechanism (least squares) and then the correction on its residuals.

    ``duration_s`` is the profiling runs' measured length (Demeter's: about 240 s from start to
    the end of measuring); ``recovery_cap_s`` the profiler's cap (values at or above are censored).
    """
    obs, notes = check_profiling_runs(observations)
    profile, fitted = fit_mechanism(obs, base, recovery_cap_s=recovery_cap_s, duration_s=duration_s, max_nfev=max_nfev)
    mech = _mechanism(profile, obs, overload_horizon_s(duration_s))
    x = _features(obs, mech)
    rate = obs["input_rate"].to_numpy(float)
    thr = obs["throughput"].to_numpy(float)
    models: dict[str, Any] = {
        "thr": fit_capacity_correction(x, mech["capacity"], rate, thr, keeps_up_factor=KEEPS_UP_FACTOR, seed=seed)
    }
    lat = obs["latency_ms"].to_numpy(float)
    has_lat = np.isfinite(lat)
    good_latency_ms = GOOD_LATENCY_FACTOR * float(np.percentile(lat[has_lat], 10)) if has_lat.any() else float("inf")
    lat_resid = np.log(np.maximum(lat[has_lat], 1e-3)) - np.log(np.maximum(mech["latency_ms"][has_lat], 1e-3))
    models["lat"] = boosted_trees(seed=seed).fit(x[has_lat], lat_resid)
    models["lat_good"] = _classifier(x[has_lat], lat[has_lat] <= good_latency_ms, seed)
    rec = obs["recovery_s"].to_numpy(float)
    has_rec = np.isfinite(rec)
    below = has_rec & (rec < recovery_cap_s)
    if below.sum() >= 3:
        models["rec"] = boosted_trees(seed=seed).fit(x[below], np.log(np.maximum(rec[below], 1.0)))
        models["rec_ok"] = _classifier(x[has_rec], rec[has_rec] <= recovery_limit_s, seed)
    elif has_rec.any():
        notes.append(
            f"only {int(below.sum())} recovery time(s) below the {recovery_cap_s:g} s cap: recovery models are not fitted"
        )
    return GreyBoxTwin(
        profile=profile,
        params=fitted,
        good_latency_ms=good_latency_ms,
        recovery_cap_s=recovery_cap_s,
        recovery_limit_s=recovery_limit_s,
        duration_s=duration_s,
        models=models,
        notes=notes,
    )


#: Mechanism parameters fitted in stages, each on the measurement it explains (capacity on
#: throughput, latency on latency, recovery on recovery), so one heavy-tailed target cannot bend
#: the parameters of another.
MECHANISM_STAGES: dict[str, tuple[str, ...]] = {
    "throughput": (
        "cost_scale",
        "shared_core_knee",
        "shared_core_exponent",
        "extra_core_efficiency",
        "task_base_mb",
        "tm_overhead_mb",
        "gc_slowdown",
    ),
    "latency_ms": ("base_latency_ms", "queue_ms"),
    "recovery_s": ("failure_detection_s", "restart_base_s"),
}


def fit_mechanism(
    obs: pd.DataFrame,
    base: ClusterProfile,
    *,
    recovery_cap_s: float = 360.0,
    duration_s: int = 240,
    max_nfev: int = 60,
) -> tuple[ClusterProfile, dict[str, float]]:
    """Fit the mechanistic twin's parameters stage by stage (:data:`MECHANISM_STAGES`), censoring-aware.

    Capacity: a run that kept up (throughput >= 0.95 x rate) only says capacity >= its throughput
    (penalised only when the model is below), a run that fell behind pins capacity at its
    throughput. Recovery: a run at the cap only says recovery >= cap. Residuals are in log space.
    """
    from scipy.optimize import least_squares

    horizon = overload_horizon_s(duration_s)
    rate, thr = obs["input_rate"].to_numpy(float), obs["throughput"].to_numpy(float)
    lat, rec = obs["latency_ms"].to_numpy(float), obs["recovery_s"].to_numpy(float)
    kept = thr >= KEEPS_UP_FACTOR * rate
    has_lat, has_rec = np.isfinite(lat), np.isfinite(rec)
    capped = has_rec & (rec >= recovery_cap_s)
    profile, fitted = base, {}

    def residuals_for(stage: str, m: dict[str, np.ndarray]) -> np.ndarray:
        if stage == "throughput":
            r = np.log(np.maximum(m["capacity"], 1.0)) - np.log(thr)
            return np.where(kept, np.minimum(r, 0.0), r)
        if stage == "latency_ms":
            return (np.log(np.maximum(m["latency_ms"], 1e-3)) - np.log(np.maximum(lat, 1e-3)))[has_lat]
        r = np.log(np.maximum(np.minimum(m["recovery_s"], recovery_cap_s), 1.0)) - np.log(
            np.maximum(np.minimum(rec, recovery_cap_s), 1.0)
        )
        return np.where(capped, np.minimum(r, 0.0), r)[has_rec]

    for stage, names in MECHANISM_STAGES.items():
        if (stage == "latency_ms" and not has_lat.any()) or (stage == "recovery_s" and not has_rec.any()):
            continue
        start = {p: (1.0 if p == "cost_scale" else float(getattr(profile, p))) for p in names}
        if start.get("shared_core_knee", 1.0) <= 0:
            start["shared_core_knee"] = 0.5  # off in the base profile: start inside the range
        lo = np.log([PARAM_BOUNDS[p][0] for p in names])
        hi = np.log([PARAM_BOUNDS[p][1] for p in names])
        x0 = np.clip(np.log([max(start[p], 1e-9) for p in names]), lo + 1e-6, hi - 1e-6)
        current = profile

        def res(
            x: np.ndarray, names: tuple[str, ...] = names, stage: str = stage, current: ClusterProfile = current
        ) -> np.ndarray:
            return residuals_for(stage, _mechanism(apply_params(current, dict(zip(names, np.exp(x)))), obs, horizon))

        fit = least_squares(res, x0, bounds=(lo, hi), diff_step=1e-3, max_nfev=max_nfev)
        values = dict(zip(names, np.exp(fit.x)))
        profile = apply_params(current, values)
        fitted.update({p: float(v) for p, v in values.items()})
    return profile, fitted
