"""Calibrate the twin's restart cost on measured rescale restarts of Flink's reactive mode.

Use :func:`calibrate_restart` (or :func:`calibrate_restart_on_folder` on a demeter-ads-format
folder) after the mechanism is fitted on profiling runs: given per-minute measurements of the job
under reactive mode + an HPA (latency, TaskManagers, throughput; ``measured_60s/*reactive*.csv``),
it fits the restart terms so that one twin restart from the TaskManager count before each measured
rescale to the count after it, at the measured throughput, costs as much latency in total as the
measured rescales did. With no such file the profile is returned unchanged with a note saying so.
Then refit the mechanism with the fitted terms held (``benchmarks/fidelity/twin_fidelity.py`` and
``flinktune twin calibrate`` do): its recovery stage (``failure_detection_s``, ``restart_base_s``)
was fitted on the profiling runs' recoveries with the old ``restart_per_tm_s``, which every restart shares.

What is measured: a *rescale episode* is a run of consecutive minutes in which the (per-minute
mean) TaskManager count changes, between two whole counts that differ. Its cost is the excess
latency integrated over the episode and the minute after it, ``sum(max(latency - base, 0)) x 60 s``
in seconds x seconds, where ``base`` is the run's median latency over minutes with no change in or
next to them. Episodes from 2 minutes before to 1 minute after an injected failure (given
``injections``) are left out: those are failure recoveries, fitted on the profiling runs.

What is fitted, from what (one total per step, so one term per step):

1. scale-downs (no pods start): ``rescale_warmup_s``, the warm-up after a rescale restart, which
   nothing else pins (unset, it is ``warmup_s``, default 20 s). It is its own term because a rescale
   restarts the job in TaskManagers that keep running (warm JVMs), unlike a fresh deployment (the
   profiling runs, whose fit rests on ``warmup_s``); failures keep ``warmup_s`` too. The capacity
   right after a restart (``warmup_initial_capacity``) stays: minute data cannot tell a short deep
   warm-up from a long shallow one. Only if the warm-up reaches 0 (restart downtime and replay alone
   cost more than measured) is ``restart_per_tm_s`` (a default, 0.3 s; it is in every restart,
   failures included) fitted on the same episodes.
2. scale-ups, with step 1's terms: ``tm_start_s``, the time new pods take before the restart.

Not fitted here: ``restart_base_s`` (from the profiling runs' recoveries) and the replay from the last
completed checkpoint (the checkpoint interval). How the cost splits between the terms of a step is
the order above, not something the minute data shows.

An episode may hold more than one real restart (new pods register at different times; reactive
mode restarts on each change of the resources); the twin restarts once per rescale, so the fit
gives the cost of a measured *episode* per twin restart, an upper bound on a single real restart.
Episodes the twin could not keep up with at the lower TaskManager count (rate >= 0.9 x its
capacity) are left out: their cost is the twin's capacity, not the restart.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
from scipy.optimize import brentq

from flinktune.calibration.cpu import read_measured_columns
from flinktune.config_space import Configuration
from flinktune.twin import mechanics as mech
from flinktune.twin.profile import ClusterProfile
from flinktune.twin.simulator import TwinJob

__all__ = [
    "RESCALE_COLUMNS",
    "RestartCalibration",
    "calibrate_restart",
    "calibrate_restart_on_folder",
    "find_reactive_measurements",
    "read_reactive_measurements",
    "rescale_episodes",
    "twin_rescale_cost",
]

#: Columns a per-minute measurement file needs (demeter-ads ``measured_60s`` format).
RESCALE_COLUMNS: tuple[str, ...] = ("timestamp", "latency", "task_managers", "throughput")
#: Bounds of the fitted warm-up, s.
_MIN_WARMUP_S, _MAX_WARMUP_S = 0.0, 120.0
#: Twin seconds before and after the restart in the forward model (the cost is over by then).
_LEAD_S, _TAIL_S = 60, 240
#: An episode's rate must stay under this share of the twin's capacity at the lower count.
_MAX_UTILISATION = 0.9


@dataclass(frozen=True)
class RestartCalibration:
    """The outcome: the profile (changed or not), the warm-up and what it rests on."""

    profile: ClusterProfile
    fitted: dict[str, float]
    measured_cost_s2: float | None  # per scale-down episode
    twin_cost_s2_before: float | None  # per scale-down episode, the profile as given
    episodes: int
    note: str


def find_reactive_measurements(folder: str | Path) -> list[Path]:
    """The reactive method's per-minute files in a demeter-ads-format folder (empty when there are none)."""
    return sorted((Path(folder) / "measured_60s").glob("*reactive*.csv"))


def read_reactive_measurements(files: Sequence[str | Path]) -> pd.DataFrame:
    """The rows of ``files`` (column ``run``: the file's stem), sorted by time per run; a
    ``ValueError`` names a file that lacks a needed column or has no usable row."""
    frames = []
    for f in files:
        df = read_measured_columns(f, RESCALE_COLUMNS).dropna()
        df = df[(df["task_managers"] > 0) & (df["latency"] > 0) & (df["throughput"] >= 0)]
        if df.empty:
            raise ValueError(f"{f}: no usable row (finite latency > 0, task_managers > 0, throughput >= 0)")
        frames.append(df.sort_values("timestamp").assign(run=Path(f).stem))
    if not frames:
        return pd.DataFrame(columns=[*RESCALE_COLUMNS, "run"])
    return pd.concat(frames, ignore_index=True)


def rescale_episodes(measured: pd.DataFrame, injections: Iterable[float] = ()) -> pd.DataFrame:
    """One row per rescale episode of ``measured`` (per-minute rows, optional ``run`` column):
    ``run``, ``start_ts``, ``minutes``, ``tm_before``, ``tm_after`` (whole counts), ``rate`` (the
    throughput of the minute before) and ``cost_s2`` (excess latency x time, s x s).

    Episodes that start or end at a fractional count, change nothing, or lie near an injected
    failure (``injections``: epoch seconds) are left out.
    """
    missing = [c for c in RESCALE_COLUMNS if c not in measured.columns]
    if missing:
        raise ValueError(f"measured: missing column(s) {missing}; need {list(RESCALE_COLUMNS)}")
    inj = np.sort(np.asarray(list(injections), dtype=float))
    rows = []
    runs = measured.groupby("run", sort=False) if "run" in measured.columns else [("", measured)]
    for run, df in runs:
        ts, tm, lat = (df[c].to_numpy(float) for c in ("timestamp", "task_managers", "latency"))
        thr = df["throughput"].to_numpy(float)
        changed = np.r_[False, np.abs(np.diff(tm)) > 1e-6]
        near = changed | np.r_[changed[1:], False] | np.r_[False, changed[:-1]]
        if (~near).sum() == 0:
            continue
        base = float(np.median(lat[~near]))
        i, n = 1, len(df)
        while i < n - 1:
            if not changed[i]:
                i += 1
                continue
            j = i
            while j + 1 < n and changed[j + 1]:
                j += 1
            before, after = tm[i - 1], tm[min(j + 1, n - 1)]
            whole = abs(before - round(before)) < 1e-6 and abs(after - round(after)) < 1e-6
            hit = inj.size and np.any((inj >= ts[i] - 120) & (inj <= ts[j] + 60))
            if whole and round(before) != round(after) and not hit and j + 1 < n:
                cost = float(np.clip(lat[i : j + 2] - base, 0, None).sum() * 60.0 / 1000.0)
                rows.append((run, int(ts[i]), j - i + 1, int(round(before)), int(round(after)), float(thr[i - 1]), cost))
            i = j + 1
    cols = ["run", "start_ts", "minutes", "tm_before", "tm_after", "rate", "cost_s2"]
    return pd.DataFrame(rows, columns=cols)


def _at(config: Configuration, tms: int) -> Configuration:
    return config.with_(parallelism=int(tms) * config.task_slots, vertex_parallelism={})


def twin_rescale_cost(profile: ClusterProfile, config: Configuration, tm_before: int, tm_after: int, rate: float) -> float:
    """Excess latency x time (s x s) of one reactive-mode restart of the twin from ``tm_before`` to
    ``tm_after`` TaskManagers (``config``'s shape) at a constant ``rate``, noise off.

    Averaged over three phases of the checkpoint interval (the replay from the last checkpoint
    depends on when the restart falls)."""
    quiet = profile.with_(latency_noise=0.0)
    interval = config.checkpoint_interval_s
    costs = []
    for phase in (0, interval // 3, (2 * interval) // 3):
        job = TwinJob(quiet, _at(config, tm_before), reactive=True)
        job.run(np.full(_LEAD_S + phase, rate), emit=False)
        job.apply(_at(config, tm_after))
        job.run(np.full(_TAIL_S, rate), emit=False)
        p50 = job.history()["latency_p50_ms"].to_numpy(float)
        lead = _LEAD_S + phase
        base = float(np.median(p50[lead - 10 : lead]))
        costs.append(float(np.clip(p50[lead:] - base, 0, None).sum() / 1000.0))
    return float(np.mean(costs))


def _fit(
    profile: ClusterProfile, config: Configuration, name: str, bounds: tuple[float, float], use: pd.DataFrame
) -> tuple[float, str, float]:
    """The value of ``name`` in ``bounds`` at which the twin's summed cost over ``use`` equals the
    measured sum (the cost grows with each fitted term), a note on a bound, and the twin's sum before."""
    measured = float(use["cost_s2"].sum())
    keys = list(zip(use["tm_before"].astype(int), use["tm_after"].astype(int), use["rate"].astype(float)))

    def total(value: float) -> float:
        p = profile.with_(**{name: float(value)})
        return sum(twin_rescale_cost(p, config, a, b, r) for a, b, r in keys)

    current = getattr(profile, name)
    before = total(float(profile.warmup_s if current is None else current))  # rescale_warmup_s None: warmup_s
    lo, hi = bounds
    if total(lo) >= measured:
        return lo, "at the lower bound", before
    if total(hi) <= measured:
        return hi, "at the upper bound", before
    return float(brentq(lambda v: total(v) - measured, lo, hi, xtol=0.01 * (hi - lo))), "", before


def calibrate_restart(profile: ClusterProfile, config: Configuration, episodes: pd.DataFrame) -> RestartCalibration:
    """``profile`` with its restart cost fitted on measured rescale ``episodes`` (from
    :func:`rescale_episodes`; the twin restarts once per episode at ``config``'s shape), in steps:

    1. on the scale-downs (no new pods): ``rescale_warmup_s`` in [0, 120] s so that the twin's summed
       cost equals the measured sum; only when it reaches 0 (downtime and replay alone cost more) is
       ``restart_per_tm_s`` fitted in [0, 2] s the same way (the warm-up first: nothing else pins it;
       the per-TaskManager time is a default, while ``restart_base_s`` is fitted on the profiling
       runs' recoveries);
    2. on the scale-ups, with those: ``tm_start_s`` (starting the new pods) in [0, 120] s.

    A step with no usable episode leaves its terms as they are and says so in the note.
    """
    need = {"tm_before", "tm_after", "rate", "cost_s2"}
    if not need <= set(episodes.columns):
        raise ValueError(f"episodes: missing column(s) {sorted(need - set(episodes.columns))}")
    lo_tm = np.minimum(episodes["tm_before"], episodes["tm_after"]).to_numpy(int)
    caps = np.array([float(mech.capacity(mech.layout(profile, _at(config, n)), np.ones(1))[0]) for n in lo_tm])
    usable = episodes[(episodes["rate"].to_numpy(float) < _MAX_UTILISATION * caps) & (episodes["rate"] > 0)]
    downs, ups = usable[usable["tm_after"] < usable["tm_before"]], usable[usable["tm_after"] > usable["tm_before"]]
    fitted: dict[str, float] = {}
    notes = [f"{len(usable)} of {len(episodes)} measured rescale episodes usable"]
    cost_measured = cost_before = None
    if len(downs):
        cost_measured = float(downs["cost_s2"].mean())
        w, bound, before = _fit(profile, config, "rescale_warmup_s", (_MIN_WARMUP_S, _MAX_WARMUP_S), downs)
        cost_before = before / len(downs)
        fitted["rescale_warmup_s"] = w
        notes.append(
            f"{len(downs)} scale-downs: measured {cost_measured:.1f} s*s each, twin {cost_before:.1f} before; "
            f"rescale_warmup_s {w:.1f}" + (f" ({bound})" if bound else "")
        )
        profile = profile.with_(rescale_warmup_s=round(w, 2))
        if w <= _MIN_WARMUP_S:
            v, bound, _ = _fit(profile, config, "restart_per_tm_s", (0.0, 2.0), downs)
            fitted["restart_per_tm_s"] = v
            notes.append(f"restart_per_tm_s {v:.3f}" + (f" ({bound})" if bound else ""))
            profile = profile.with_(restart_per_tm_s=round(v, 4))
    else:
        notes.append(f"no usable scale-down: rescale_warmup_s stays {profile.rescale_warmup_s}")
    if len(ups):
        v, bound, before = _fit(profile, config, "tm_start_s", (0.0, 120.0), ups)
        fitted["tm_start_s"] = v
        notes.append(
            f"{len(ups)} scale-ups: measured {float(ups['cost_s2'].mean()):.1f} s*s each, twin {before / len(ups):.1f} "
            f"before this step; tm_start_s {v:.1f}" + (f" ({bound})" if bound else "")
        )
        profile = profile.with_(tm_start_s=round(v, 2))
    else:
        notes.append(f"no usable scale-up: tm_start_s stays {profile.tm_start_s:g}")
    return RestartCalibration(profile, fitted, cost_measured, cost_before, len(usable), "; ".join(notes))


def calibrate_restart_on_folder(folder: str | Path, profile: ClusterProfile, config: Configuration) -> RestartCalibration:
    """:func:`calibrate_restart` on a demeter-ads-format ``folder``: its ``measured_60s/*reactive*.csv``,
    leaving out episodes near the injections of ``results_recovery_per_injection.csv`` (column
    ``inj_ts``) when it has one. With no reactive file, ``profile`` unchanged and a note saying so."""
    files = find_reactive_measurements(folder)
    if not files:
        where = Path(folder) / "measured_60s"
        return RestartCalibration(
            profile, {}, None, None, 0, f"not calibrated: no measured reactive run ({where}/*reactive*.csv)"
        )
    inj_file = Path(folder) / "results_recovery_per_injection.csv"
    injections = pd.read_csv(inj_file)["inj_ts"].dropna() if inj_file.exists() else pd.Series(dtype=float)
    return calibrate_restart(profile, config, rescale_episodes(read_reactive_measurements(files), injections))
