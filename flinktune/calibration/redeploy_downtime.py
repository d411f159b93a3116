"""Calibrate how long a savepoint redeploy stops the twin's job, on the backlog after the measured operator's rescales.

Use :func:`calibrate_downtime_on_folder` (or :func:`calibrate_downtime` on episodes you already have)
after the restart cost is fitted and before the redeploy warm-up
(:mod:`flinktune.calibration.redeploy_warmup`): it sets ``redeploy_base_s``, the fixed part of a
redeploy's downtime (tear down, new JobManager and TaskManager pods; the savepoint, the per-TaskManager
term and the state transfer stay as they are), so that the twin's median backlog in the minute after a
measured scale-down starts equals the measured median. With no ``measured_60s/*operator*.csv`` the
profile is returned unchanged with a note saying so.

Why the backlog and not the latency: the latency excess after a redeploy is the downtime and the
warm-up together (one total, so one term), while the backlog a minute in is set mostly by how long the
job took no input: the warm-up only slows its draining. The warm-up is then refitted on the latency
excess with the downtime held.

What is measured: the rescale episodes of :func:`~flinktune.calibration.restart.rescale_episodes`
(the TaskManager count changes between two whole counts, away from the injected failures) in the
operator's files, and the backlog at each minute from the episode's first minute ``s``: ``consumer_lag``
x ``lag_scale`` / the throughput of the minute before, in seconds of input. ``consumer_lag`` is the
mean over the source subtasks of Kafka's ``records-lag-max`` (dos-group/demeter ``ClientsManager.getLag``)
[seen], about one partition's lag; the whole backlog is about the partitions x it (Demeter's topic: 24
partitions, ``kubernetes/kafka/values.yaml`` [seen]; the folder does not record them, so the default is
the space's largest parallelism [inferred]). Only scale-downs are fitted (before a scale-up the job was
too small, and that lag is not the redeploy's); the scale-ups are reported beside. Episodes the twin
could not keep up with at the lower count (rate >= 0.9 x its capacity) are left out.

The twin's side (:func:`twin_redeploy_backlog`): one redeploy at a constant rate, started at 0, 15, 30
and 45 s into minute ``s`` (when the measured one started inside its minute is not known), noise off;
a minute's backlog is the mean over the seconds the job runs, since the lag is a metric of the running
source (a stopped job reports none) [inferred: in the measured minute ``s`` the backlog is a median
2 s of input, the quiet level, although the count already changes]. A minute with no running second
reads the backlog at its end (what the source reports when it comes back).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import pandas as pd

from flinktune.calibration.cpu import read_measured_columns
from flinktune.calibration.redeploy_warmup import at_taskmanagers, solve_increasing, usable_episodes
from flinktune.calibration.restart import RESCALE_COLUMNS, rescale_episodes
from flinktune.config_space import Configuration
from flinktune.twin.profile import ClusterProfile
from flinktune.twin.simulator import TwinJob

__all__ = [
    "DOWNTIME_COLUMNS",
    "DowntimeCalibration",
    "calibrate_downtime",
    "calibrate_downtime_on_folder",
    "redeploy_backlogs",
    "twin_redeploy_backlog",
]

#: Columns a per-minute operator file needs.
DOWNTIME_COLUMNS: tuple[str, ...] = (*RESCALE_COLUMNS, "consumer_lag")
#: Bounds of the fitted ``redeploy_base_s`` and ``redeploy_warmup_s``, s; most alternations of the two.
_MIN_BASE_S, _MAX_BASE_S = 0.0, 240.0
_MIN_WARMUP_S, _MAX_WARMUP_S = 0.0, 600.0
_ROUNDS = 12
#: Seconds into minute ``s`` at which the twin's redeploy starts (averaged over).
_PHASES = (0, 15, 30, 45)
#: Twin seconds at the old count before minute ``s``; minutes read from ``s`` on.
_LEAD_S, _MINUTES = 120, 4
#: The minute (after ``s``) whose median is fitted.
FIT_MINUTE = 1


@dataclass(frozen=True)
class DowntimeCalibration:
    """The outcome: the profile (changed or not), ``redeploy_base_s`` (None: not fitted), the measured and
    twin median backlogs (s of input) at minutes s, s+1, s+2, s+3 of the fitted scale-downs, and a note."""

    profile: ClusterProfile
    redeploy_base_s: float | None
    measured_backlog_s: tuple[float, ...] | None
    twin_backlog_s_before: tuple[float, ...] | None
    twin_backlog_s_after: tuple[float, ...] | None
    episodes: int
    note: str
    redeploy_warmup_s: float | None = None  # fitted with ``warmup_on_backlog`` only


def redeploy_backlogs(measured: pd.DataFrame, injections: object = (), lag_scale: float = 1.0) -> pd.DataFrame:
    """:func:`~flinktune.calibration.restart.rescale_episodes` of ``measured`` (per-minute rows with
    :data:`DOWNTIME_COLUMNS`, optional ``run``) with ``backlog_0`` .. ``backlog_3``: ``consumer_lag`` x
    ``lag_scale`` / ``rate`` at the episode's first minute and the three after it (s of input; NaN where
    the minute is missing)."""
    if not (lag_scale > 0 and np.isfinite(lag_scale)):
        raise ValueError(f"lag_scale must be a positive number, got {lag_scale!r}")
    missing = [c for c in DOWNTIME_COLUMNS if c not in measured.columns]
    if missing:
        raise ValueError(f"measured: missing column(s) {missing}; need {list(DOWNTIME_COLUMNS)}")
    eps = rescale_episodes(measured, injections)  # type: ignore[arg-type]
    runs = measured.groupby("run", sort=False) if "run" in measured.columns else [("", measured)]
    lag = {(run, int(t)): float(v) for run, df in runs for t, v in zip(df["timestamp"], df["consumer_lag"])}
    for k in range(_MINUTES):
        eps[f"backlog_{k}"] = [
            lag.get((run, int(ts) + 60 * k), np.nan) * lag_scale / rate if rate > 0 else np.nan
            for run, ts, rate in zip(eps["run"], eps["start_ts"], eps["rate"])
        ]
    return eps


def twin_redeploy_backlog(
    profile: ClusterProfile, config: Configuration, tm_before: int, tm_after: int, rate: float
) -> np.ndarray:
    """The twin's backlog (s of input) in minutes s .. s+3 of one savepoint redeploy from ``tm_before``
    to ``tm_after`` TaskManagers (``config``'s shape) at a constant ``rate`` started inside minute s,
    the mean over :data:`_PHASES`; a minute's backlog is its mean over the running seconds (phases in
    which the job does not run in it are left out; in none: the backlog at its end)."""
    quiet = profile.with_(latency_noise=0.0, adaptive_scheduler=False)
    per_phase: list[list[float]] = []
    per_end: list[list[float]] = []
    for phase in _PHASES:
        job = TwinJob(quiet, at_taskmanagers(config, tm_before))
        job.run(np.full(_LEAD_S + phase, rate), emit=False)
        job.apply(at_taskmanagers(config, tm_after), mode="redeploy")
        job.run(np.full(60 * _MINUTES - phase, rate), emit=False)
        h = job.history()
        lag = h["lag"].to_numpy(float)[_LEAD_S:] / rate
        running = h["running"].to_numpy(float)[_LEAD_S:] > 0
        minutes, ends = [], []
        for k in range(_MINUTES):
            sl = slice(60 * k, 60 * (k + 1))
            on = running[sl]
            minutes.append(float(lag[sl][on].mean()) if on.any() else np.nan)
            ends.append(float(lag[sl][-1]))
        per_phase.append(minutes)
        per_end.append(ends)
    runs = np.array(per_phase)
    counts = np.isfinite(runs).sum(axis=0)
    return np.where(counts > 0, np.nansum(runs, axis=0) / np.maximum(counts, 1), np.mean(per_end, axis=0))


def _medians(profile: ClusterProfile, config: Configuration, use: pd.DataFrame, base: float) -> np.ndarray:
    p = profile.with_(redeploy_base_s=float(base))
    keys = zip(use["tm_before"].astype(int), use["tm_after"].astype(int), use["rate"].astype(float))
    return np.median([twin_redeploy_backlog(p, config, a, b, r) for a, b, r in keys], axis=0)


def _fmt(values: np.ndarray | tuple[float, ...]) -> str:
    return " / ".join(f"{v:.1f}" for v in values)


def calibrate_downtime(
    profile: ClusterProfile,
    config: Configuration,
    episodes: pd.DataFrame,
    *,
    warmup_on_backlog: bool = False,
    method: str = "operator",
) -> DowntimeCalibration:
    """``profile`` with ``redeploy_base_s`` in [0, 240] s so that the twin's median backlog in minute s+1
    of the usable scale-down ``episodes`` (from :func:`redeploy_backlogs`) equals the measured median;
    unchanged, with a note, when there is none.

    ``warmup_on_backlog``: ``redeploy_warmup_s`` in [0, 600] s is fitted too, on the median in minute
    s+2 (how fast the backlog drains), the two fits alternated until neither moves by more than 1 s
    (at most :data:`_ROUNDS` rounds); minute s+3 is left to check them. ``method`` names whose changes
    the episodes are, in the note."""
    need = {"tm_before", "tm_after", "rate", *(f"backlog_{k}" for k in range(_MINUTES))}
    if not need <= set(episodes.columns):
        raise ValueError(f"episodes: missing column(s) {sorted(need - set(episodes.columns))}")
    fit_col = f"backlog_{FIT_MINUTE}"
    ok = usable_episodes(profile, config, episodes) & episodes[fit_col].notna().to_numpy()
    if warmup_on_backlog:
        ok &= episodes[f"backlog_{FIT_MINUTE + 1}"].notna().to_numpy()
    usable = episodes[ok]
    downs, ups = usable[usable["tm_after"] < usable["tm_before"]], usable[usable["tm_after"] > usable["tm_before"]]
    if downs.empty:
        note = f"no usable {method} scale-down (of {len(episodes)} episodes): redeploy downtime not calibrated"
        return DowntimeCalibration(profile, None, None, None, None, 0, note)
    cols = [f"backlog_{k}" for k in range(_MINUTES)]
    measured = tuple(float(v) for v in downs[cols].median())
    before = _medians(profile, config, downs, profile.redeploy_base_s)
    warm = profile.warmup_s if profile.redeploy_warmup_s is None else profile.redeploy_warmup_s
    out, b, w = profile, profile.redeploy_base_s, warm
    base_bound = warm_bound = ""

    def fit_base(p: ClusterProfile) -> tuple[float, str]:
        return solve_increasing(
            lambda v: float(_medians(p, config, downs, v)[FIT_MINUTE]) - measured[FIT_MINUTE], _MIN_BASE_S, _MAX_BASE_S, 0.5
        )

    def fit_warm(p: ClusterProfile) -> tuple[float, str]:
        def gap(v: float) -> float:
            return (
                float(_medians(p.with_(redeploy_warmup_s=v), config, downs, p.redeploy_base_s)[FIT_MINUTE + 1])
                - measured[FIT_MINUTE + 1]
            )

        return solve_increasing(gap, _MIN_WARMUP_S, _MAX_WARMUP_S, 1.0)

    b, base_bound = fit_base(out)
    out = out.with_(redeploy_base_s=round(b, 1))
    for _ in range(_ROUNDS if warmup_on_backlog else 0):
        b_old, w_old = b, w
        w, warm_bound = fit_warm(out)
        out = out.with_(redeploy_warmup_s=round(w, 1))
        b, base_bound = fit_base(out)  # the downtime last, so that minute s+1 is met
        out = out.with_(redeploy_base_s=round(b, 1))
        if abs(b - b_old) <= 1.0 and abs(w - w_old) <= 1.0:
            break
    after = _medians(out, config, downs, out.redeploy_base_s)
    note = (
        f"{len(downs)} {method} scale-downs of {len(episodes)} episodes: median backlog in minutes s..s+3 measured "
        f"{_fmt(measured)} s of input, twin {_fmt(before)} before (redeploy_base_s {profile.redeploy_base_s:g}, "
        f"warm-up {warm:g} s), {_fmt(after)} after; redeploy_base_s {b:.1f}{base_bound} (fitted on minute s+{FIT_MINUTE})"
    )
    if warmup_on_backlog:
        note += f", redeploy_warmup_s {w:.1f}{warm_bound} (on minute s+{FIT_MINUTE + 1})"
    if len(ups):
        up_twin = _medians(out, config, ups, out.redeploy_base_s)
        note += f"; {len(ups)} scale-ups (not fitted): measured {_fmt(tuple(ups[cols].median()))}, twin {_fmt(up_twin)} after"
    return DowntimeCalibration(out, b, measured, tuple(before), tuple(after), len(downs), note, w if warmup_on_backlog else None)


def calibrate_downtime_on_folder(
    folder: str | Path,
    profile: ClusterProfile,
    config: Configuration,
    *,
    partitions: int | None = None,
    warmup_on_backlog: bool = False,
    method: str = "operator",
) -> DowntimeCalibration:
    """:func:`calibrate_downtime` on ``folder``'s ``measured_60s/*<method>*.csv`` (the lag x ``partitions``,
    default ``config``'s parallelism: the space's largest), leaving out episodes near the injections of
    ``results_recovery_per_injection.csv`` (column ``inj_ts``) when it has one. ``method``: whose
    measured changes to fit: one method's (e.g. ``"demeter"``) says what its own redeploys cost
    (``benchmarks/fidelity/demeter_trajectory.py --redeploy-fit``), and several joined by commas pool their scale-downs:
    every measured savepoint redeploy counts once, whichever controller asked for it. The twin's profile is
    fitted on ``"operator,demeter"`` pooled (:data:`flinktune.calibration.folder.REDEPLOY_METHODS`); a
    method without files is left out of the pool."""
    names = [m.strip() for m in method.split(",")]
    if not all(names) or any(c in m for m in names for c in "*?[]/"):
        raise ValueError(f"method must name measured methods (e.g. 'operator', 'demeter,operator'), got {method!r}")
    where = Path(folder) / "measured_60s"
    # The operator's: what busy.find_operator_measurements reads.
    files = sorted({f for m in names for f in where.glob(f"*{m}*.csv")})
    if not files:
        none = " and ".join(f"no measured {m} run" for m in names)
        globs = ", ".join(f"{where}/*{m}*.csv" for m in names)
        return DowntimeCalibration(profile, None, None, None, None, 0, f"not calibrated: {none} ({globs})")
    scale = config.parallelism if partitions is None else partitions
    if scale < 1:
        raise ValueError(f"partitions must be at least 1, got {scale!r}")
    frames = []
    for f in files:
        df = read_measured_columns(f, DOWNTIME_COLUMNS).dropna()
        df = df[(df["task_managers"] > 0) & (df["latency"] > 0) & (df["throughput"] >= 0)]
        frames.append(df.sort_values("timestamp").assign(run=Path(f).stem))
    inj_file = Path(folder) / "results_recovery_per_injection.csv"
    injections = pd.read_csv(inj_file)["inj_ts"].dropna() if inj_file.exists() else pd.Series(dtype=float)
    episodes = redeploy_backlogs(pd.concat(frames, ignore_index=True), injections, float(scale))
    cal = calibrate_downtime(profile, config, episodes, warmup_on_backlog=warmup_on_backlog, method=method)
    return replace(cal, note=cal.note + f"; measured lag x {scale:g} (the source partitions)")
