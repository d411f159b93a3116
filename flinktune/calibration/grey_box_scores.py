"""The grey-box twin's scores on held-out profiling runs (the leave-one-run-out targets) and its leave-one-group-out cross-validation.

Use :func:`cross_validate` on a table in the ``profiling_runs.csv`` format with a grouping column
(``flinktune twin calibrate --group-by run``, ``benchmarks/fidelity/twin_fidelity.py``): each group in turn is
held out, the twin fitted on the others (:func:`flinktune.calibration.grey_box.fit_grey_box`) and scored on it
(:func:`score`). Scores come in pairs: the grey-box's and, prefixed ``mech_``, the mechanism's alone.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from flinktune.calibration.grey_box import KEEPS_UP_FACTOR, GreyBoxTwin, check_profiling_runs, fit_grey_box
from flinktune.calibration.mechanism import CalibrationError
from flinktune.twin.profile import ClusterProfile

__all__ = ["cross_validate", "score"]


def score(twin: GreyBoxTwin, observations: pd.DataFrame, *, good_latency_ms: float | None = None) -> dict[str, float]:
    """The leave-one-run-out scores of ``twin`` on ``observations`` (corrected and mechanism-only).

    ``throughput_mape``; ``keeps_up_accuracy`` (throughput >= 0.95 x rate); ``latency_class_accuracy``
    (good = at most ``good_latency_ms``, by default the twin's boundary from its fit runs);
    ``recovery_class_accuracy`` (<= the limit; a capped run is slow) and ``recovery_mape`` on runs
    below the cap; ``mech_*`` the same from the mechanism alone.
    """
    obs, _ = check_profiling_runs(observations, where="scored runs")
    pred = twin.predict(obs)
    rate, thr = obs["input_rate"].to_numpy(float), obs["throughput"].to_numpy(float)
    lat, rec = obs["latency_ms"].to_numpy(float), obs["recovery_s"].to_numpy(float)
    bound = twin.good_latency_ms if good_latency_ms is None else good_latency_ms
    keeps = thr >= KEEPS_UP_FACTOR * rate
    has_lat, has_rec = np.isfinite(lat), np.isfinite(rec)
    below = has_rec & (rec < twin.recovery_cap_s)
    out = {
        "n": float(len(obs)),
        "throughput_mape": float(np.mean(np.abs(pred["throughput"] - thr) / thr)),
        "mech_throughput_mape": float(np.mean(np.abs(pred["mech_throughput"] - thr) / thr)),
        "keeps_up_accuracy": float(np.mean(pred["keeps_up"].to_numpy() == keeps)),
        "mech_keeps_up_accuracy": float(np.mean((pred["mech_throughput"].to_numpy() >= KEEPS_UP_FACTOR * rate) == keeps)),
        "latency_class_accuracy": float(np.mean(pred["latency_good"].to_numpy()[has_lat] == (lat[has_lat] <= bound)))
        if has_lat.any()
        else float("nan"),
        "mech_latency_class_accuracy": float(
            np.mean((pred["mech_latency_ms"].to_numpy()[has_lat] <= bound) == (lat[has_lat] <= bound))
        )
        if has_lat.any()
        else float("nan"),
        "recovery_class_accuracy": float("nan"),
        "mech_recovery_class_accuracy": float("nan"),
        "recovery_mape": float("nan"),
        "mech_recovery_mape": float("nan"),
    }
    if "recovery_s" in pred and has_rec.any():
        slow = rec[has_rec] > twin.recovery_limit_s
        out["recovery_class_accuracy"] = float(np.mean(pred["recovers"].to_numpy()[has_rec] == ~slow))
        out["mech_recovery_class_accuracy"] = float(
            np.mean((pred["mech_recovery_s"].to_numpy()[has_rec] <= twin.recovery_limit_s) == ~slow)
        )
        if below.any():
            out["recovery_mape"] = float(np.mean(np.abs(pred["recovery_s"].to_numpy()[below] - rec[below]) / rec[below]))
            mech_rec = np.minimum(pred["mech_recovery_s"].to_numpy()[below], twin.recovery_cap_s)
            out["mech_recovery_mape"] = float(np.mean(np.abs(mech_rec - rec[below]) / rec[below]))
    return out


def cross_validate(observations: pd.DataFrame, base: ClusterProfile, *, group_by: str = "run", **fit_kwargs: Any) -> pd.DataFrame:
    """Leave-one-group-out scores: fit on all other groups, score the held-out one (one row each).

    A group of a single row is used for fitting but not scored on its own (one run cannot give a
    class accuracy); fewer than two groups is an error naming the column.
    """
    obs, _ = check_profiling_runs(observations, group_by=group_by)
    groups = obs[group_by]
    sizes = groups.value_counts()
    scored = [g for g in sorted(sizes.index) if sizes[g] >= 2]
    if groups.nunique() < 2 or not scored:
        raise CalibrationError(
            f"cross-validation by {group_by!r} needs at least two groups and one of 2+ rows; got sizes {sizes.to_dict()}"
        )
    rows = []
    for g in scored:
        train, test = obs[groups != g], obs[groups == g]
        twin = fit_grey_box(train.drop(columns=[group_by]), base, **fit_kwargs)
        rows.append({group_by: g, **score(twin, test.drop(columns=[group_by]))})
    return pd.DataFrame(rows)
