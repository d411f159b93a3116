"""Calibrate the busy time the operator autoscaler reads on the measured operator runs' own decisions.

Use :func:`calibrate_busy_on_folder` (or :func:`calibrate_busy_time` on decisions you already have)
after the mechanism and the CPU are calibrated, to get ``busy_time_scale`` for
:class:`~flinktune.policies.autoscaler.AutoscalerPolicy`: the operator's busy time = the twin's x it.

Why: the operator autoscaler sizes each vertex from its busy time (``busyTimeMsPerSecond``,
docs/baselines.md, autoscaler), which none of the data measured; the twin's busy time is the capacity fit's
(about 0.37-0.40 at static, where the JVM CPU load was 0.23). What the data does show is what the
measured operator *chose*: each rescale, from ``p0`` to ``p1`` TaskManagers at a known throughput and
lag, is ``p1 = align(ceil(p0 x clip(busy x (lag / catch-up + (rate + lag growth) x (restart / catch-up
+ 1 / target)) / rate)))`` (the operator's target capacity over its true processing rate, rate /
busy). With the twin's busy time of the bottleneck (rate / the twin's capacity at ``p0``) scaled by
a factor, that predicts ``p1``; the factor is the one whose predictions fit the measured ``p1``
best (least squares on log parallelism, a grid of factors). [inferred] The job's TaskManagers
follow its busiest vertex (one slot each), so the bottleneck stands for the job.

The same decisions also give the spread of that reading (:func:`calibrate_busy_noise`): with the factor
held, the log-normal sigma on the busy time under which the measured ``p1`` are most likely (maximum
likelihood over a grid, each decision's probability from fixed normal quantiles). The data cannot tell
noise in the operator's 1 min readings from the rest of the model's misfit, so it is an upper bound on
the noise. [inferred]

Decisions read from the per-minute files (``measured_60s/*operator*.csv``, columns
:data:`BUSY_COLUMNS`): a stretch of at least ``min_stable`` minutes at one whole TaskManager count,
followed within ``max_gap`` minutes (the savepoint upgrade's partial minutes) by a stretch at
another whole count. A failure's restart comes back to the same count and is not a decision. The
rate, lag and lag growth are the last two minutes before the change (the operator's 1 min window).

The lag's unit: the operator (1.6, ``ScalingMetrics.computeLagMetrics``) reads the source's
``pendingRecords`` summed over its partitions [seen], while demeter-ads' ``consumer_lag`` is the mean
over the source subtasks of Kafka's ``records-lag-max`` (dos-group/demeter ``ClientsManager.getLag``)
[seen]: the largest lag among a subtask's partitions, about one partition's lag whatever the
parallelism. The operator's lag is so about the partition count x the measured one, so the measured lag
and lag growth are multiplied by ``lag_scale`` (:func:`measured_lag_scale`: the topic's partitions;
Demeter's topic had 24, ``kubernetes/kafka/values.yaml`` ``numPartitions: 24`` [seen], equal to its
static scale-out and ``pipeline.max-parallelism``). The folder does not record the partitions, so the
default is the largest parallelism of the space (a Kafka source runs at most one busy subtask per
partition, and Demeter sized the topic to its largest job) [inferred]. The twin's lag is already the
job's total backlog (its ``pendingRecords`` is one job-level series), so the twin side needs no factor.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from flinktune.calibration.cpu import read_measured_columns
from flinktune.config_space import Configuration
from flinktune.twin import mechanics as mech
from flinktune.twin.profile import ClusterProfile

__all__ = [
    "BUSY_COLUMNS",
    "BusyCalibration",
    "BusyNoise",
    "OperatorDecision",
    "calibrate_busy_noise",
    "calibrate_busy_noise_on_folder",
    "calibrate_busy_on_folder",
    "calibrate_busy_time",
    "find_operator_measurements",
    "measured_lag_scale",
    "operator_decisions",
    "predicted_parallelism",
    "twin_busy",
]

#: Columns a per-minute operator file needs (demeter-ads ``measured_60s`` format).
BUSY_COLUMNS: tuple[str, ...] = ("task_managers", "throughput", "consumer_lag")
#: The factors tried (the fit is a grid search: the prediction is a step function of the factor).
DEFAULT_GRID: np.ndarray = np.round(np.arange(0.05, 2.0 + 1e-9, 0.005), 4)
#: The spreads tried by :func:`calibrate_busy_noise` (log-normal sigma of the busy time read).
NOISE_GRID: np.ndarray = np.round(np.arange(0.0, 0.8 + 1e-9, 0.05), 3)
#: Fewer decisions than this: no calibration (the factor would rest on too little).
MIN_DECISIONS = 5


@dataclass(frozen=True)
class OperatorDecision:
    """One measured rescale: TaskManagers before and after, and the input the operator saw (rec/s, records)."""

    p_from: int
    p_to: int
    rate: float
    lag: float
    growth: float


@dataclass(frozen=True)
class BusyCalibration:
    """The outcome: the factor (None: not calibrated), the decisions it rests on and how well it fits them."""

    busy_time_scale: float | None
    decisions: int
    exact: int
    within_one: int
    note: str


@dataclass(frozen=True)
class BusyNoise:
    """The spread of the busy time read (None: not calibrated), the decisions and the log-likelihood at it."""

    busy_time_noise: float | None
    decisions: int
    log_likelihood: float
    note: str


def find_operator_measurements(folder: str | Path) -> list[Path]:
    """The operator autoscaler's per-minute files in a demeter-ads-format folder (empty when there are none)."""
    return sorted((Path(folder) / "measured_60s").glob("*operator*.csv"))


def measured_lag_scale(config: Configuration, partitions: int | None = None) -> float:
    """How many times the measured ``consumer_lag`` the operator's lag is: the source topic's ``partitions``,
    or when not given the largest parallelism ``config`` runs (see the module's note on the lag's unit)."""
    n = config.parallelism if partitions is None else partitions
    if n < 1:
        raise ValueError(f"partitions must be at least 1, got {n!r}")
    return float(n)


def operator_decisions(
    df: pd.DataFrame, *, min_stable: int = 2, max_gap: int = 4, lag_scale: float = 1.0
) -> list[OperatorDecision]:
    """The rescales in one per-minute frame (columns :data:`BUSY_COLUMNS`, one row a minute, in time order);
    the measured lag and its growth x ``lag_scale`` (the operator's unit, :func:`measured_lag_scale`)."""
    if not (lag_scale > 0 and np.isfinite(lag_scale)):
        raise ValueError(f"lag_scale must be a positive number, got {lag_scale!r}")
    missing = [c for c in BUSY_COLUMNS if c not in df.columns]
    if missing:
        raise ValueError(f"operator decisions: missing column(s) {missing}; need {list(BUSY_COLUMNS)}")
    if min_stable < 1 or max_gap < 0:
        raise ValueError(f"min_stable must be >= 1 and max_gap >= 0, got {min_stable} and {max_gap}")
    tm = df["task_managers"].to_numpy(float)
    thr = df["throughput"].to_numpy(float)
    lag = df["consumer_lag"].to_numpy(float) * lag_scale
    whole = np.isfinite(tm) & (np.abs(tm - np.round(tm)) < 1e-6) & (tm >= 1)
    stretches: list[tuple[int, int, int]] = []  # (first row, last row, TaskManagers)
    i = 0
    while i < len(tm):
        if not whole[i]:
            i += 1
            continue
        j = i
        while j + 1 < len(tm) and whole[j + 1] and tm[j + 1] == tm[i]:
            j += 1
        if j - i + 1 >= min_stable:
            stretches.append((i, j, int(round(tm[i]))))
        i = j + 1
    out = []
    for (_, end, p0), (start, _, p1) in zip(stretches, stretches[1:]):
        if p0 == p1 or start - end - 1 > max_gap:
            continue
        w = slice(max(0, end - 1), end + 1)  # the last two minutes before the change
        r, lg = thr[w], lag[w]
        if not (np.all(np.isfinite(r)) and np.all(r > 0)):
            continue
        lags = lg[np.isfinite(lg)]
        growth = float((lags[-1] - lags[0]) / (60.0 * (len(lags) - 1))) if len(lags) > 1 else 0.0
        out.append(OperatorDecision(p0, p1, float(r.mean()), float(max(lags[-1], 0.0)) if len(lags) else 0.0, growth))
    return out


def twin_busy(profile: ClusterProfile, config: Configuration, parallelism: int, rate: float) -> float:
    """The busy time of the twin's bottleneck at ``parallelism`` (``config``'s other knobs) and ``rate``:
    rate / capacity (uncapped: above 1 the twin could not have processed that rate)."""
    lay = mech.layout(profile, config.with_(parallelism=int(parallelism), vertex_parallelism={}))
    gc = mech.gc_factor(profile, mech.memory_pressure(profile, lay, np.array([rate])))
    return float(rate / mech.capacity(lay, gc)[0])


def predicted_parallelism(policy: Any, d: OperatorDecision, busy: float, max_parallelism: int) -> int:
    """The parallelism ``policy`` (an :class:`~flinktune.policies.autoscaler.AutoscalerPolicy`) recommends
    from ``d.p_from`` when its bottleneck is ``busy`` at ``d``'s rate and lag (capped at ``max_parallelism``)."""
    want, _ = policy.recommend(d.p_from, d.rate / busy, max(d.rate + d.growth, 0.0), d.lag / policy.catch_up_s)
    return int(min(want, max_parallelism))


def _usable(decisions: Sequence[OperatorDecision], top: int) -> list[OperatorDecision]:
    """The rescales both fits read: parallelisms within [1, ``top``] that changed, at a positive rate."""
    return [d for d in decisions if 1 <= d.p_from <= top and 1 <= d.p_to <= top and d.p_from != d.p_to and d.rate > 0]


def _folder_decisions(
    files: Sequence[Path], *, min_stable: int = 2, max_gap: int = 4, lag_scale: float = 1.0
) -> list[OperatorDecision]:
    """Every rescale in the per-minute ``files`` (:func:`operator_decisions` of each, in file order), the
    lag x ``lag_scale``."""
    return [
        d
        for f in files
        for d in operator_decisions(
            read_measured_columns(f, BUSY_COLUMNS), min_stable=min_stable, max_gap=max_gap, lag_scale=lag_scale
        )
    ]


def calibrate_busy_time(
    profile: ClusterProfile,
    config: Configuration,
    policy: Any,
    decisions: Sequence[OperatorDecision],
    *,
    grid: np.ndarray = DEFAULT_GRID,
) -> BusyCalibration:
    """The factor on the twin's busy time whose predicted decisions (:func:`predicted_parallelism` under
    ``policy``'s settings, at most ``config``'s parallelism) fit the measured ``decisions`` best."""
    g = np.asarray(grid, dtype=float)
    if g.size == 0 or not np.all(np.isfinite(g) & (g > 0)):
        raise ValueError("grid: need at least one finite, positive factor")
    top = config.parallelism
    usable = _usable(decisions, top)
    if len(usable) < MIN_DECISIONS:
        return BusyCalibration(
            None, len(usable), 0, 0, f"{len(usable)} usable operator decisions (< {MIN_DECISIONS}): busy time not calibrated"
        )
    busy = np.array([twin_busy(profile, config, d.p_from, d.rate) for d in usable])
    want = np.log([d.p_to for d in usable])
    # Pre-compute every factor's predictions (a few hundred factors x tens of decisions).
    preds = np.array([[predicted_parallelism(policy, d, f * b, top) for d, b in zip(usable, busy)] for f in g])
    loss = ((np.log(preds) - want) ** 2).mean(axis=1)
    best = np.flatnonzero(loss <= loss.min() + 1e-12)
    k = int(best[len(best) // 2])  # the middle of a flat optimum
    f = float(g[k])
    p = preds[k]
    to = np.array([d.p_to for d in usable])
    exact, near = int((p == to).sum()), int((np.abs(p - to) <= 1).sum())
    note = (
        f"busy_time_scale {f:.3f} from {len(usable)} measured operator decisions (twin busy time at static and the mean "
        f"decision rate {twin_busy(profile, config, top, float(np.mean([d.rate for d in usable]))):.3f}); "
        f"{exact} predicted exactly, {near} within one TaskManager"
    )
    return BusyCalibration(f, len(usable), exact, near, note)


def calibrate_busy_on_folder(
    folder: str | Path,
    profile: ClusterProfile,
    config: Configuration,
    policy: Any,
    *,
    min_stable: int = 2,
    max_gap: int = 4,
    partitions: int | None = None,
) -> BusyCalibration:
    """:func:`calibrate_busy_time` on the decisions in ``folder``'s ``measured_60s/*operator*.csv``, their lag
    in the operator's unit (x :func:`measured_lag_scale` of ``config`` and ``partitions``; 1: as measured);
    with no such file, not calibrated, with a note saying so."""
    files = find_operator_measurements(folder)
    if not files:
        return BusyCalibration(None, 0, 0, 0, f"no measured_60s/*operator*.csv in {folder}: busy time not calibrated")
    scale = measured_lag_scale(config, partitions)
    cal = calibrate_busy_time(
        profile, config, policy, _folder_decisions(files, min_stable=min_stable, max_gap=max_gap, lag_scale=scale)
    )
    unit = f"; measured lag x {scale:g} (the operator reads the sum over the source partitions)"
    return BusyCalibration(cal.busy_time_scale, cal.decisions, cal.exact, cal.within_one, cal.note + unit)


def calibrate_busy_noise(
    profile: ClusterProfile,
    config: Configuration,
    policy: Any,
    decisions: Sequence[OperatorDecision],
    busy_time_scale: float,
    *,
    grid: np.ndarray = NOISE_GRID,
    draws: int = 200,
) -> BusyNoise:
    """The log-normal sigma on the busy time read (the twin's x ``busy_time_scale`` x exp(sigma z)) under
    which the measured ``decisions`` are most likely: each decision's probability is the share of ``draws``
    normal quantiles z whose prediction (:func:`predicted_parallelism`) is its ``p_to`` (floored at 1e-3)."""
    from scipy.special import ndtri

    g = np.asarray(grid, dtype=float)
    if g.size == 0 or not np.all(np.isfinite(g) & (g >= 0)):
        raise ValueError("grid: need at least one finite, non-negative sigma")
    if not (busy_time_scale > 0 and np.isfinite(busy_time_scale)) or draws < 1:
        raise ValueError(f"busy_time_scale must be positive and draws >= 1, got {busy_time_scale!r}, {draws!r}")
    top = config.parallelism
    usable = _usable(decisions, top)
    if len(usable) < MIN_DECISIONS:
        return BusyNoise(
            None, len(usable), float("nan"), f"{len(usable)} usable operator decisions (< {MIN_DECISIONS}): noise not calibrated"
        )
    z = ndtri((np.arange(draws) + 0.5) / draws)
    busy = np.array([busy_time_scale * twin_busy(profile, config, d.p_from, d.rate) for d in usable])
    ll = np.zeros(g.size)
    for i, sigma in enumerate(g):
        for d, b in zip(usable, busy):
            hits = sum(predicted_parallelism(policy, d, float(b * np.exp(sigma * zz)), top) == d.p_to for zz in z)
            ll[i] += np.log(max(hits / draws, 1e-3))
    best = np.flatnonzero(ll >= ll.max() - 1e-9)
    k = int(best[len(best) // 2])
    note = (
        f"busy_time_noise {g[k]:.2f} (log-normal sigma, most likely on {len(usable)} measured operator decisions at "
        f"busy_time_scale {busy_time_scale:.3f}; log-likelihood {ll[k]:.1f}, {ll[0]:.1f} without noise; an upper bound: "
        "it also absorbs the decision model's misfit)"
    )
    return BusyNoise(float(g[k]), len(usable), float(ll[k]), note)


def calibrate_busy_noise_on_folder(
    folder: str | Path,
    profile: ClusterProfile,
    config: Configuration,
    policy: Any,
    busy_time_scale: float,
    *,
    partitions: int | None = None,
) -> BusyNoise:
    """:func:`calibrate_busy_noise` on the decisions in ``folder``'s ``measured_60s/*operator*.csv`` (lag in
    the operator's unit, as :func:`calibrate_busy_on_folder`)."""
    decisions = _folder_decisions(find_operator_measurements(folder), lag_scale=measured_lag_scale(config, partitions))
    return calibrate_busy_noise(profile, config, policy, decisions, busy_time_scale)
