"""Calibrate the twin's CPU use per record on a measured static run's CPU load.

Use :func:`calibrate_cpu` after the mechanism is fitted on profiling runs (which carry no CPU):
given the per-minute measurements of the job running a fixed configuration (its CPU load,
TaskManagers and throughput), it sets ``cpu_per_busy`` so that the twin's CPU at the measured
throughput equals the measured CPU on average. :func:`find_static_measurements` finds those
files in a folder in the demeter-ads format (``measured_60s/*baseline*.csv``); with none, the
profile is returned unchanged with a note saying so.

What is calibrated and what is not: only CPU. Capacity, and so the busy time the twin reports
(throughput / capacity), stay as fitted on the profiling runs' throughput. A real job can be
busy without using a core (the ADS job's campaign lookup waits on a store), so a twin fitted on
capacity alone over-states CPU; the HPA of reactive mode scales on CPU, the operator
autoscaler on busy time.

Measured CPU load is the JVM's process CPU load (0-1 of the cores the TaskManager container
has), so cores used = load x TaskManagers x cores per TaskManager.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from flinktune.config_space import Configuration
from flinktune.twin import mechanics as mech
from flinktune.twin.profile import ClusterProfile

__all__ = [
    "CPU_COLUMNS",
    "CpuCalibration",
    "calibrate_cpu",
    "find_static_measurements",
    "read_measured_columns",
    "read_static_measurements",
]

#: Columns a per-minute measurement file needs (demeter-ads ``measured_60s`` format).
CPU_COLUMNS: tuple[str, ...] = ("cpu_load", "task_managers", "throughput")
#: Bounds of the fitted factor (the profile field's own bounds are (0, 2]).
_MIN_FACTOR, _MAX_FACTOR = 0.05, 2.0


@dataclass(frozen=True)
class CpuCalibration:
    """The outcome: the profile (changed or not), the factor and what it rests on."""

    profile: ClusterProfile
    cpu_per_busy: float | None
    measured_cpu_load: float | None
    twin_cpu_load_before: float | None
    minutes: int
    note: str


def find_static_measurements(folder: str | Path) -> list[Path]:
    """The static method's per-minute files in a demeter-ads-format folder (empty when there are none)."""
    return sorted((Path(folder) / "measured_60s").glob("*baseline*.csv"))


def read_measured_columns(path: str | Path, columns: Sequence[str]) -> pd.DataFrame:
    """``columns`` of one per-minute measurement CSV (``measured_60s/*.csv``) as numbers (unparsable: NaN);
    a ``ValueError`` names the file and the columns it lacks."""
    df = pd.read_csv(path)
    missing = [c for c in columns if c not in df.columns]
    if missing:
        raise ValueError(f"{path}: missing column(s) {missing}; need {list(columns)}")
    return df[list(columns)].apply(pd.to_numeric, errors="coerce")


def read_static_measurements(files: Sequence[str | Path]) -> pd.DataFrame:
    """The rows of ``files`` usable for calibration (finite, positive throughput and TaskManagers,
    CPU load in [0, 1]); a ``ValueError`` names a file that lacks a needed column."""
    frames = [read_measured_columns(f, CPU_COLUMNS) for f in files]
    if not frames:
        return pd.DataFrame(columns=list(CPU_COLUMNS))
    df = pd.concat(frames, ignore_index=True).dropna()
    ok = (df["throughput"] > 0) & (df["task_managers"] > 0) & (df["cpu_load"] >= 0) & (df["cpu_load"] <= 1)
    return df[ok].reset_index(drop=True)


def calibrate_cpu(profile: ClusterProfile, config: Configuration, measured: pd.DataFrame) -> CpuCalibration:
    """``profile`` with ``cpu_per_busy`` set so that the twin's mean CPU at ``config`` and the measured
    throughputs equals the measured mean CPU (load x reserved cores).

    Only minutes at ``config``'s TaskManager count are used (a static run). The twin's CPU is
    ``work x throughput x cpu_per_busy + idle``, linear in the factor, so the fit is closed-form.
    Returns the profile unchanged, with a note, when no minute is usable.
    """
    tms = config.taskmanagers
    rows = measured[np.isclose(measured["task_managers"].to_numpy(float), tms)] if len(measured) else measured
    if len(rows) == 0:
        return CpuCalibration(
            profile,
            None,
            None,
            None,
            0,
            f"no measured minutes at the static {tms} TaskManagers: CPU not calibrated (cpu_per_busy stays {profile.cpu_per_busy:g})",
        )
    thr = rows["throughput"].to_numpy(float)
    measured_cores = float((rows["cpu_load"].to_numpy(float) * config.total_cpu).mean())
    unit = profile.with_(cpu_per_busy=1.0)
    lay = mech.layout(unit, config)
    gc = mech.gc_factor(unit, mech.memory_pressure(unit, lay, thr))
    idle = unit.idle_cores_per_tm * tms
    # The twin's busy cores, uncapped (the cap at the reservation only matters above it).
    work = float(mech.busy_cores(lay, thr, gc).mean())
    before = float(np.minimum(work * profile.cpu_per_busy + idle, config.total_cpu) / config.total_cpu)
    factor = float(np.clip((measured_cores - idle) / work, _MIN_FACTOR, _MAX_FACTOR)) if work > 0 else 1.0
    note = (
        f"cpu_per_busy {factor:.3f} from {len(rows)} measured minutes at {tms} TaskManagers: measured CPU load "
        f"{measured_cores / config.total_cpu:.3f}, twin {before:.3f} before"
    )
    return CpuCalibration(
        profile.with_(cpu_per_busy=round(factor, 4)), factor, measured_cores / config.total_cpu, before, len(rows), note
    )
