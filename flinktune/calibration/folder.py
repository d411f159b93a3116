"""The twin calibrated on a measured folder: the grey-box fit on its profiling runs, then the calibrations on its measured methods, in the order each needs.

A folder in the demeter-ads format holds profiling runs (what :func:`flinktune.calibration.grey_box.fit_grey_box`
fits) and, in ``measured_60s/``, per-minute measurements of methods run for real. Three terms of the
profile are fitted on those, not on the profiling runs, and each reads the one before:

1. the restart cost on the reactive runs' rescales (:mod:`flinktune.calibration.restart`); the
   mechanism's recovery stage was fitted with the old restart terms, so the mechanism is refitted
   with the fitted ones held (it then fits detection and ``restart_base_s``, not these);
2. the fixed part of a savepoint redeploy's downtime (``redeploy_base_s``) on the backlog after the
   scale-downs of the operator's and Demeter's runs pooled (:data:`REDEPLOY_METHODS`; both change the
   job by the same savepoint redeploy), its first minute (:mod:`flinktune.calibration.redeploy_downtime`);
3. the warm-up after a savepoint redeploy, the downtime held: with ``redeploy_fit="backlog"`` (the
   default) on the same backlog's second minute, alternated with step 2 until both settle; with
   ``"downtime"`` on the scale-downs' latency read per minute over the seconds the job runs
   (:mod:`flinktune.calibration.redeploy_warmup`); with ``"latency"`` step 2 is left
   out and the warm-up is fitted on the latency of every second; the profiling runs' fit depends on
   none of them;
4. the CPU per unit of busy time on the static run (:mod:`flinktune.calibration.cpu`).

A missing file leaves its term as it was, with a note saying so. Use :func:`calibrate_folder` wherever
a calibrated twin is made from such a folder (``flinktune twin calibrate --group-by`` and the
benchmarks), so that both make the same profile; :func:`calibrate_beside` runs the steps above on a
twin already fitted. Policy-side fits (the operator's busy time, the published targets) are not the
twin's and stay with their callers.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pandas as pd

from flinktune.calibration.cpu import calibrate_cpu, find_static_measurements, read_static_measurements
from flinktune.calibration.grey_box import GreyBoxTwin, fit_grey_box
from flinktune.calibration.redeploy_downtime import calibrate_downtime_on_folder
from flinktune.calibration.redeploy_warmup import calibrate_redeploy_on_folder
from flinktune.calibration.restart import calibrate_restart_on_folder
from flinktune.config_space import Configuration, space_from_runs
from flinktune.twin.profile import ClusterProfile

__all__ = ["REDEPLOY_FITS", "REDEPLOY_METHODS", "FolderCalibration", "calibrate_beside", "calibrate_folder"]

#: How the redeploy's terms are fitted on the operator runs (see the module's note, steps 2 and 3).
REDEPLOY_FITS: tuple[str, ...] = ("backlog", "downtime", "latency")

#: Whose measured scale-downs the redeploy's terms are fitted on, pooled: every savepoint redeploy the operator
#: made counts once, whichever controller asked for it (with the operator's alone Demeter's p95
#: comes out 24x against 6.3x measured, 11x with both).
REDEPLOY_METHODS = "operator,demeter"


@dataclass(frozen=True)
class FolderCalibration:
    """The grey-box twin whose ``profile`` carries every calibration, and one note per term
    (``restart``, ``downtime``, ``redeploy``, ``cpu``) saying what it was fitted on or why it was not."""

    twin: GreyBoxTwin
    notes: dict[str, str]


def calibrate_folder(
    folder: str | Path,
    runs: pd.DataFrame,
    base: ClusterProfile,
    *,
    default: Configuration | None = None,
    measured: bool = True,
    redeploy_fit: str = "backlog",
    redeploy_methods: str = REDEPLOY_METHODS,
    **fit_kwargs: Any,
) -> FolderCalibration:
    """The grey-box twin fitted on ``runs`` (``folder``'s profiling table, screened, without any
    grouping column) from ``base`` (:func:`~flinktune.calibration.grey_box.fit_grey_box` with
    ``fit_kwargs``), then calibrated on ``folder``'s measured methods (:func:`calibrate_beside`;
    ``measured=False``: the fit alone, no notes). ``default`` is the static configuration the measured
    runs deployed; None: the largest configuration of ``runs``. A ``ValueError`` names an unknown
    ``redeploy_fit`` (before any fit), a table the fit refuses or a measured file that cannot be read."""
    if redeploy_fit not in REDEPLOY_FITS:
        raise ValueError(f"redeploy_fit must be one of {list(REDEPLOY_FITS)}, got {redeploy_fit!r}")
    twin = fit_grey_box(runs, base, **fit_kwargs)
    if not measured:
        return FolderCalibration(twin, {})
    default = space_from_runs(runs).maximum if default is None else default
    return calibrate_beside(
        folder, twin, runs, base, default, redeploy_fit=redeploy_fit, redeploy_methods=redeploy_methods, **fit_kwargs
    )


def calibrate_beside(
    folder: str | Path,
    twin: GreyBoxTwin,
    runs: pd.DataFrame,
    base: ClusterProfile,
    default: Configuration,
    *,
    redeploy_fit: str = "backlog",
    redeploy_methods: str = REDEPLOY_METHODS,
    **fit_kwargs: Any,
) -> FolderCalibration:
    """``twin`` (fitted by ``fit_grey_box(runs, base, **fit_kwargs)``) calibrated on ``folder``'s
    measured methods; ``default`` is the static configuration the measured runs deployed (the space's
    maximum). ``runs`` is the profiling table without any grouping column. ``redeploy_fit``: which of
    the redeploy's terms are fitted on what (:data:`REDEPLOY_FITS`, the module's note); ``redeploy_methods``:
    whose measured scale-downs steps 2 and 3 read (comma-separated, pooled; default :data:`REDEPLOY_METHODS`). A ``ValueError``
    names a measured file that cannot be read, or an unknown ``redeploy_fit``."""
    if redeploy_fit not in REDEPLOY_FITS:
        raise ValueError(f"redeploy_fit must be one of {list(REDEPLOY_FITS)}, got {redeploy_fit!r}")
    folder = Path(folder)
    notes: dict[str, str] = {}
    restart = calibrate_restart_on_folder(folder, twin.profile, default)
    notes["restart"] = restart.note
    if restart.fitted:
        held = {k: float(getattr(restart.profile, k)) for k in restart.fitted}
        twin = fit_grey_box(runs, base.with_(**held), **fit_kwargs)
        p = twin.profile
        notes["restart"] += (
            f"; mechanism refitted with these held: failure_detection_s {p.failure_detection_s:.3g}, "
            f"restart_base_s {p.restart_base_s:.3g}"
        )
    if redeploy_fit == "latency":
        notes["downtime"] = f"not calibrated (redeploy fit 'latency'): redeploy_base_s {twin.profile.redeploy_base_s:g} kept"
    else:
        on_backlog = redeploy_fit == "backlog"
        downtime = calibrate_downtime_on_folder(
            folder, twin.profile, default, warmup_on_backlog=on_backlog, method=redeploy_methods
        )
        twin, notes["downtime"] = replace(twin, profile=downtime.profile), downtime.note
        if on_backlog and downtime.redeploy_warmup_s is not None:
            notes["redeploy"] = f"redeploy_warmup_s {downtime.redeploy_warmup_s:.1f}, fitted with the downtime on the backlog"
    if "redeploy" not in notes:
        # With the downtime fitted on a running job's metric, the warm-up's latency is read the same way.
        redeploy = calibrate_redeploy_on_folder(folder, twin.profile, default, per_minute=redeploy_fit == "downtime")
        twin, notes["redeploy"] = replace(twin, profile=redeploy.profile), redeploy.note
    static_files = find_static_measurements(folder)
    if static_files:
        cpu = calibrate_cpu(twin.profile, default, read_static_measurements(static_files))
        twin, notes["cpu"] = replace(twin, profile=cpu.profile), cpu.note
    else:
        notes["cpu"] = f"CPU not calibrated: no measured static run ({folder / 'measured_60s'}/*baseline*.csv)"
    return FolderCalibration(twin, notes)
