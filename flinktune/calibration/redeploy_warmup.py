"""Calibrate the twin's warm-up after a savepoint redeploy on the measured operator autoscaler's rescales.

Use :func:`calibrate_redeploy_on_folder` (or :func:`calibrate_redeploy` on episodes you already
have) after the mechanism and the restart cost are fitted: it sets ``redeploy_warmup_s``, the
warm-up after a redeploy, so that one twin redeploy from the TaskManager count before each measured
scale-down to the count after it, at the measured throughput, costs as much latency in total as the
measured scale-downs did. With no ``measured_60s/*operator*.csv`` the profile is returned unchanged
with a note saying so.

Why its own term: the operator autoscaler 1.6 on Flink 1.17 (the measured runs; docs/baselines.md, demeter) carries
out every rescale as a full savepoint upgrade, new JobManager and TaskManager pods, so cold JVMs, unlike
a failure (the job restarts in TaskManagers that keep running, fitted on the profiling runs'
recoveries with ``warmup_s``) or a reactive-mode rescale (``rescale_warmup_s``,
:mod:`flinktune.calibration.restart`). Nothing else pins it: the profiling runs' capacity is
measured minutes after their deployment.

What is measured: the rescale episodes of :func:`~flinktune.calibration.restart.rescale_episodes`
(minutes in which the TaskManager count changes between two whole counts, away from the injected
failures; cost = excess latency over the run's quiet median x time, s x s) in the operator's files.
Only scale-downs are fitted: before a scale-up the job was too small, and that lag is in the
episode's cost but is not the redeploy's. The scale-ups' measured and twin costs are reported beside.
Episodes the twin could not keep up with at the lower count (rate >= 0.9 x its capacity) are left out.

An operator rescale of a vertex that is not the largest redeploys without changing the TaskManager
count; those episodes cannot be told from other dips in the minute data and are not used. [inferred]
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
from scipy.optimize import brentq

from flinktune.calibration.busy import find_operator_measurements
from flinktune.calibration.restart import read_reactive_measurements, rescale_episodes
from flinktune.config_space import Configuration
from flinktune.twin import mechanics as mech
from flinktune.twin.profile import ClusterProfile
from flinktune.twin.simulator import TwinJob

__all__ = [
    "RedeployCalibration",
    "at_taskmanagers",
    "calibrate_redeploy",
    "calibrate_redeploy_on_folder",
    "solve_increasing",
    "twin_redeploy_cost",
    "usable_episodes",
]

#: Bounds of the fitted warm-up, s.
_MIN_WARMUP_S, _MAX_WARMUP_S = 0.0, 600.0
#: Twin seconds before and after the redeploy in the forward model (long enough for the longest warm-up).
_LEAD_S, _TAIL_S = 60, 900
#: Seconds into its minute at which the redeploy starts, for the per-minute reading (averaged over).
_PHASES = (0, 15, 30, 45)
#: An episode's rate must stay under this share of the twin's capacity at the lower count.
_MAX_UTILISATION = 0.9


@dataclass(frozen=True)
class RedeployCalibration:
    """The outcome: the profile (changed or not), the warm-up (None: not fitted) and what it rests on."""

    profile: ClusterProfile
    redeploy_warmup_s: float | None
    measured_cost_s2: float | None  # per scale-down episode
    twin_cost_s2_before: float | None  # per scale-down episode, the profile as given
    episodes: int
    note: str


def at_taskmanagers(config: Configuration, tms: int) -> Configuration:
    """``config``'s shape at ``tms`` TaskManagers (the operator rescales every vertex alike)."""
    return config.with_(parallelism=int(tms) * config.task_slots, vertex_parallelism={})


def usable_episodes(profile: ClusterProfile, config: Configuration, episodes: pd.DataFrame) -> np.ndarray:
    """Which rescale ``episodes`` (columns ``tm_before``, ``tm_after``, ``rate``) a redeploy fit can use:
    a positive rate under :data:`_MAX_UTILISATION` of the twin's capacity at the lower count, so that
    what follows the redeploy is its cost and not a job too small for its load."""
    lo_tm = np.minimum(episodes["tm_before"], episodes["tm_after"]).to_numpy(int)
    caps = np.array([float(mech.capacity(mech.layout(profile, at_taskmanagers(config, n)), np.ones(1))[0]) for n in lo_tm])
    rate = episodes["rate"].to_numpy(float)
    return (rate < _MAX_UTILISATION * caps) & (rate > 0)


def solve_increasing(gap: Callable[[float], float], lo: float, hi: float, xtol: float) -> tuple[float, str]:
    """The root of the increasing ``gap`` in [lo, hi], or the bound it stays beyond, with a note saying so."""
    if gap(lo) >= 0:
        return lo, " (at the lower bound)"
    if gap(hi) <= 0:
        return hi, " (at the upper bound)"
    return float(brentq(gap, lo, hi, xtol=xtol)), ""


def twin_redeploy_cost(
    profile: ClusterProfile, config: Configuration, tm_before: int, tm_after: int, rate: float, *, per_minute: bool = False
) -> float:
    """Excess latency x time (s x s) of one savepoint redeploy of the twin from ``tm_before`` to
    ``tm_after`` TaskManagers (``config``'s shape) at a constant ``rate``, noise off (the p50, as
    :func:`~flinktune.calibration.restart.twin_rescale_cost`).

    ``per_minute``: read as the measured minutes are, a latency metric of a running job: the redeploy
    starts 0, 15, 30 or 45 s into a minute (averaged), each minute's excess is its mean over the seconds
    the job runs (none: no excess) x 60 s. Off: every second's excess, the seconds the job is down
    included (it then reports the wait of the records held back)."""
    quiet = profile.with_(latency_noise=0.0, adaptive_scheduler=False)
    costs = []
    for phase in _PHASES if per_minute else (0,):
        job = TwinJob(quiet, at_taskmanagers(config, tm_before))
        job.run(np.full(_LEAD_S + phase, rate), emit=False)
        job.apply(at_taskmanagers(config, tm_after), mode="redeploy")
        job.run(np.full(_TAIL_S - phase, rate), emit=False)
        h = job.history()
        p50 = h["latency_p50_ms"].to_numpy(float)
        base = float(np.median(p50[_LEAD_S - 10 : _LEAD_S]))
        excess = np.clip(p50[_LEAD_S:] - base, 0, None) / 1000.0
        if not per_minute:
            costs.append(float(excess.sum()))
            continue
        running = h["running"].to_numpy(float)[_LEAD_S:] > 0
        minutes = [slice(k, k + 60) for k in range(0, excess.size - 59, 60)]
        costs.append(sum(float(excess[m][running[m]].mean()) * 60.0 for m in minutes if running[m].any()))
    return float(np.mean(costs))


def _total(profile: ClusterProfile, config: Configuration, use: pd.DataFrame, warmup: float, per_minute: bool = False) -> float:
    p = profile.with_(redeploy_warmup_s=float(warmup))
    keys = zip(use["tm_before"].astype(int), use["tm_after"].astype(int), use["rate"].astype(float))
    return sum(twin_redeploy_cost(p, config, a, b, r, per_minute=per_minute) for a, b, r in keys)


def calibrate_redeploy(
    profile: ClusterProfile, config: Configuration, episodes: pd.DataFrame, *, per_minute: bool = False
) -> RedeployCalibration:
    """``profile`` with ``redeploy_warmup_s`` in [0, 600] s so that the twin's summed cost over the
    usable scale-down ``episodes`` (from :func:`~flinktune.calibration.restart.rescale_episodes`)
    equals the measured sum; unchanged, with a note, when there is none. ``per_minute``: the twin's cost
    read as the measured minutes are (:func:`twin_redeploy_cost`)."""
    need = {"tm_before", "tm_after", "rate", "cost_s2"}
    if not need <= set(episodes.columns):
        raise ValueError(f"episodes: missing column(s) {sorted(need - set(episodes.columns))}")
    usable = episodes[usable_episodes(profile, config, episodes)]
    downs, ups = usable[usable["tm_after"] < usable["tm_before"]], usable[usable["tm_after"] > usable["tm_before"]]
    if downs.empty:
        return RedeployCalibration(
            profile,
            None,
            None,
            None,
            0,
            f"no usable operator scale-down (of {len(episodes)} episodes): redeploy warm-up not calibrated",
        )
    measured = float(downs["cost_s2"].sum())
    current = profile.warmup_s if profile.redeploy_warmup_s is None else profile.redeploy_warmup_s
    before = _total(profile, config, downs, current, per_minute)
    w, bound = solve_increasing(
        lambda v: _total(profile, config, downs, v, per_minute) - measured, _MIN_WARMUP_S, _MAX_WARMUP_S, 1.0
    )
    out = profile.with_(redeploy_warmup_s=round(w, 1))
    note = (
        f"{len(downs)} operator scale-downs of {len(episodes)} episodes: measured {measured / len(downs):.0f} s*s each, twin "
        f"{before / len(downs):.0f} before (warm-up {current:g} s); redeploy_warmup_s {w:.1f}{bound}"
        + ("; the twin's latency read per minute while running" if per_minute else "")
    )
    if len(ups):
        after_up = _total(out, config, ups, w, per_minute) / len(ups)
        note += f"; {len(ups)} scale-ups (not fitted): measured {float(ups['cost_s2'].mean()):.0f} s*s each, twin {after_up:.0f} after"
    return RedeployCalibration(out, w, measured / len(downs), before / len(downs), len(downs), note)


def calibrate_redeploy_on_folder(
    folder: str | Path, profile: ClusterProfile, config: Configuration, *, per_minute: bool = False
) -> RedeployCalibration:
    """:func:`calibrate_redeploy` on ``folder``'s ``measured_60s/*operator*.csv``, leaving out episodes
    near the injections of ``results_recovery_per_injection.csv`` (column ``inj_ts``) when it has one."""
    files = find_operator_measurements(folder)
    if not files:
        where = Path(folder) / "measured_60s"
        return RedeployCalibration(
            profile, None, None, None, 0, f"not calibrated: no measured operator run ({where}/*operator*.csv)"
        )
    inj_file = Path(folder) / "results_recovery_per_injection.csv"
    injections = pd.read_csv(inj_file)["inj_ts"].dropna() if inj_file.exists() else pd.Series(dtype=float)
    episodes = rescale_episodes(read_reactive_measurements(files), injections)
    return calibrate_redeploy(profile, config, episodes, per_minute=per_minute)
