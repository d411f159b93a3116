"""A measured folder (the demeter-ads format) read for the fidelity benchmarks, and the twin calibrated on it.

Use it from a benchmark that replays a folder's methods on the twin (``benchmarks/fidelity/twin_fidelity.py``,
``benchmarks/fidelity/demeter_trajectory.py``): :func:`calibrated_twin` fits the mechanism on the profiling
runs and every calibration the folder's measured methods allow; :func:`replay_trace` and
:func:`failure_spec` give the trace and the failures to replay; :func:`measured_table` the
measured means to compare with (one row per replayed policy, ratios to static). Nothing about the
workload is built in: a folder of another job in the same format runs unchanged.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pandas as pd

from flinktune.calibration.busy import calibrate_busy_noise_on_folder, calibrate_busy_on_folder
from flinktune.calibration.folder import REDEPLOY_METHODS, calibrate_folder
from flinktune.calibration.measured_changes import count_changes_on_folder
from flinktune.config_space import ConfigSpace
from flinktune.policies.autoscaler import AutoscalerPolicy
from flinktune.replay.decision_noise import DEFAULT_SIGMAS, fit_decision_noise
from flinktune.replay.harness import ReplaySettings
from flinktune.twin.profile import ClusterProfile
from flinktune.twin.workload import load_trace_csv

__all__ = [
    "DEFAULT_OPERATOR",
    "METHODS",
    "OPERATOR_NOTES",
    "TARGET_OPTIONS",
    "CalibratedTwin",
    "calibrated_twin",
    "failure_spec",
    "fit_operator_noise",
    "measured_table",
    "published_targets",
    "relative_to_static",
    "replay_trace",
]

#: Replayed policy -> the method's name in the measured summaries.
METHODS = {"static": "baseline", "demeter": "demeter", "autoscaler": "operator", "reactive": "reactive"}


def _trace_file(data: Path) -> Path:
    if (data / "trace_x3.csv").exists():
        return data / "trace_x3.csv"
    for f in sorted(data.glob("*.csv")):
        if pd.read_csv(f, nrows=1).columns.tolist() == ["timestamp", "value"]:
            return f
    raise FileNotFoundError(f"{data}: no trace file (trace_x3.csv or a timestamp,value CSV)")


def failure_spec(data: Path) -> tuple[str, str]:
    """(twin failure spec, where it comes from): the median gap between the measured injections."""
    f = data / "results_recovery_per_injection.csv"
    if f.exists():
        inj = pd.read_csv(f)
        gaps = inj.sort_values(["run", "inj_ts"]).groupby("run")["inj_ts"].diff().dropna()
        if len(gaps):
            minutes = max(1, int(round(float(gaps.median()) / 60.0)))
            return f"every:{minutes}m", f"median gap between {len(inj)} measured injections in {f.name}"
    return "every:45m", "no injection file: Demeter's protocol (every 45 min)"


#: Replayed policy -> the option its measured method's name sets (``reactive35``: a 35 % CPU target,
#: the data README's own words). Not the operator autoscaler (``operator35``): its target, 0.35, and
#: its other settings come from the published version replayed (``--operator``; Demeter's deployment
#: set 0.35 on busy time), and the busy time it reads is calibrated on its measured decisions.
TARGET_OPTIONS = {"reactive": "target_utilization"}

#: The operator autoscaler the measured runs used: operator 1.6.0 on Flink 1.17, with the settings of
#: Demeter's FlinkDeployment (its 35 % target among them); ``newest`` is the 1.10+ behaviour.
DEFAULT_OPERATOR = "demeter-1.6"
OPERATOR_NOTES = {
    "newest": "operator 1.10+ defaults: 15 min window, 0.7 target, 1 h delayed scale-down, in-place rescaling",
    "1.6": "operator 1.6.0 defaults on Flink 1.17: 10 min window, 0.7 +- 0.4, 1 h scale-up grace period, savepoint upgrades",
    "demeter-1.6": "operator 1.6.0 on Flink 1.17 as Demeter's evaluation set it: 1 min window, 2 min stabilization, "
    "0.35 +- 0.15, restart 1 min, catch-up 5 min, max parallelism 24 (here: the space's largest), 1 h scale-up grace period, savepoint upgrades",
}


def published_targets(data: Path, policies: Sequence[str] | None = None) -> dict[str, dict[str, float]]:
    """Policy options from the measured methods' file names: ``<run>_reactive35_*.csv`` means the
    reactive HPA ran at a 35 % target. Policies whose method name has no number keep their defaults."""
    out: dict[str, dict[str, float]] = {}
    names = [f.name for f in sorted((data / "measured_60s").glob("*.csv"))]
    for pol in TARGET_OPTIONS if policies is None else policies:
        method = METHODS[pol]
        found = {int(m.group(1)) for n in names if (m := re.search(rf"_{method}(\d+)_", n))}
        if len(found) == 1:
            out[pol] = {TARGET_OPTIONS[pol]: found.pop() / 100.0}
    return out


def relative_to_static(rows: pd.DataFrame, base: pd.Series) -> pd.DataFrame:
    """Measured summary rows (the columns of ``summary_by_method.csv`` / ``summary_per_run.csv``, any
    index) in the replay's units: CPU, memory and latency quantiles as ratios to ``base`` (the static
    run's row), slow recoveries and reconfigurations as counts (NaN where not measured)."""
    return pd.DataFrame(
        {
            "cpu": rows["cpu_cores_mean"] / base["cpu_cores_mean"],
            "memory": rows["mem_gib_mean"] / base["mem_gib_mean"],
            "p50": rows["lat_median_ms"] / base["lat_median_ms"],
            "p95": rows["lat_p95_ms"] / base["lat_p95_ms"],
            "p99": rows["lat_p99_ms"] / base["lat_p99_ms"],
            "slow_recoveries": rows["n_rec_gt180"].astype(float),
            "reconfigurations": rows["n_reconfigs"].astype(float),
        },
        index=rows.index,
    )


def measured_table(data: Path) -> pd.DataFrame:
    """Measured means per method, relative to static where the replay reports ratios. A method whose
    summary publishes no reconfigurations gets the count of its per-minute files
    (:mod:`flinktune.calibration.measured_changes`); ``attrs["changes_note"]`` says which and how the counter
    fares on the published counts."""
    s = pd.read_csv(data / "summary_by_method.csv").set_index("method")
    base = s.loc["baseline"]
    out = relative_to_static(s.loc[list(METHODS.values())], base)
    out.index = pd.Index(list(METHODS))
    notes = []
    for pol, method in METHODS.items():
        if pol == "static" or pd.notna(out.loc[pol, "reconfigurations"]):
            continue
        if not any((data / "measured_60s").glob(f"*_{method}*.csv")):
            continue
        counted = count_changes_on_folder(data, method)
        out.loc[pol, "reconfigurations"] = counted.mean
        notes.append(counted.note)
    out.attrs["changes_note"] = "; ".join(notes) if notes else "all published"
    prof = data / "profiling_overhead.csv"
    if prof.exists():
        cost = pd.read_csv(prof)["profiling_cpu_core_h"].mean()
        hours = pd.read_csv(data / "summary_per_run.csv")["dur_h"].mean() if (data / "summary_per_run.csv").exists() else 18.0
        out["profiling_cpu"] = 0.0
        out.loc["demeter", "profiling_cpu"] = cost / (base["cpu_cores_mean"] * hours)
    return out


@dataclass(frozen=True)
class CalibratedTwin:
    """What :func:`calibrated_twin` gives: the grey-box twin, the profile the replays run (mechanism
    and calibrations), the policy options and one note per calibration (``restart``, ``downtime``,
    ``redeploy``, ``cpu``, ``busy``)."""

    twin: Any
    profile: ClusterProfile
    options: dict[str, dict[str, Any]]
    notes: dict[str, str]


def calibrated_twin(
    data: Path,
    runs_csv: pd.DataFrame,
    base: ClusterProfile,
    space: ConfigSpace,
    *,
    max_nfev: int = 60,
    calibrate: bool = True,
    operator: str = DEFAULT_OPERATOR,
    busy_noise: bool = False,
    redeploy_fit: str = "backlog",
    source_partitions: int | None = 1,
    redeploy_methods: str = REDEPLOY_METHODS,
) -> CalibratedTwin:
    """The twin fitted on ``runs_csv`` (profiling runs with a ``run`` column) and calibrated on the
    measured methods in ``data``, in the order each calibration needs: the restart cost on the
    reactive runs (then the mechanism refitted with it held), the redeploy's downtime and warm-up on
    the operator runs (``redeploy_fit``: ``flinktune.calibration.folder.REDEPLOY_FITS``; default both on the backlog
    after their scale-downs), CPU on the static run, the published targets from the method names, the operator's busy
    time on its own decisions. ``calibrate=False``: the mechanism fit alone, default options but the
    operator's ``operator`` version. ``busy_noise``: the operator reads its busy time with the spread
    fitted on its decisions (an upper bound; off by default: it reproduces the measured cascades and p95
    but overshoots the CPU, see docs/results/twin-fidelity-ads.md). Use it wherever a
    benchmark replays the calibrated twin. ``source_partitions``: the measured lag's factor to the operator's
    in the busy-time fit (its sum over the source topic's partitions; None: the space's largest parallelism,
    Demeter's 24; 1, the default: the lag as measured, since the operator's unit makes the replay worse; ``flinktune.calibration.busy.measured_lag_scale``). ``redeploy_methods``: whose measured
    scale-downs the redeploy's downtime and warm-up are fitted on (``flinktune.calibration.folder.calibrate_folder``)."""
    cal = calibrate_folder(
        data,
        runs_csv.drop(columns=["run"]),
        base,
        default=space.maximum,
        measured=calibrate,
        redeploy_fit=redeploy_fit,
        redeploy_methods=redeploy_methods,
        max_nfev=max_nfev,
    )
    twin, profile, options = cal.twin, cal.twin.profile, {}
    notes = dict.fromkeys(("restart", "downtime", "redeploy", "cpu", "busy"), "not calibrated (--no-calibrate)")
    notes.update(cal.notes)
    if calibrate:
        options = published_targets(data)
        # The busy time the operator reads, on the measured operator's own decisions (made by the
        # version the measured runs used, whichever version is replayed).
        measured_version = AutoscalerPolicy.published(DEFAULT_OPERATOR, space)
        busy = calibrate_busy_on_folder(data, profile, space.maximum, measured_version, partitions=source_partitions)
        notes["busy"] = busy.note
        if busy.busy_time_scale is not None:
            options["autoscaler"] = {"busy_time_scale": busy.busy_time_scale}
            # The spread of that reading, on the same decisions with the factor held (an upper bound on the noise).
            noise = calibrate_busy_noise_on_folder(
                data, profile, space.maximum, measured_version, busy.busy_time_scale, partitions=source_partitions
            )
            notes["busy"] += "; " + noise.note
            if noise.busy_time_noise and busy_noise:
                options["autoscaler"]["busy_time_noise"] = noise.busy_time_noise
            elif noise.busy_time_noise:
                notes["busy"] += " (not applied: --busy-noise decisions applies it)"
    options["autoscaler"] = {**AutoscalerPolicy.published_options(operator, space), **options.get("autoscaler", {})}
    return CalibratedTwin(twin, profile, options, notes)


def fit_operator_noise(
    data: Path,
    cal: CalibratedTwin,
    space: ConfigSpace,
    trace: pd.Series,
    settings: ReplaySettings,
    *,
    workers: int = 2,
    sigmas: Sequence[float] = DEFAULT_SIGMAS,
) -> CalibratedTwin:
    """``cal`` with the operator autoscaler's ``busy_time_noise`` fitted on how often the measured operator
    changed the job (:mod:`flinktune.replay.decision_noise`: the policy replayed on ``trace`` once per spread,
    ``settings``' seed), its note added to ``notes["busy"]``; unchanged, with a note, when the folder has no
    operator runs."""
    method = METHODS["autoscaler"]
    if not any((data / "measured_60s").glob(f"*_{method}*.csv")):
        return replace(
            cal, notes={**cal.notes, "busy": cal.notes["busy"] + "; no measured operator runs: busy time read exactly"}
        )
    measured = count_changes_on_folder(data, method)
    print(
        f"fitting the operator's reading spread on its {measured.per_hour:.2f} measured changes per hour",
        file=sys.stderr,
        flush=True,
    )
    fit = fit_decision_noise(
        trace,
        cal.profile,
        space,
        settings,
        cal.options["autoscaler"],
        measured.per_hour,
        sigmas=sigmas,
        workers=workers,
        progress=sys.stderr,
    )
    options = {**cal.options, "autoscaler": {**cal.options["autoscaler"], "busy_time_noise": fit.sigma}}
    return replace(cal, options=options, notes={**cal.notes, "busy": cal.notes["busy"] + "; " + fit.note})


def replay_trace(data: Path, hours: float | None = None) -> tuple[pd.Series, str]:
    """The folder's trace at 1 s (its first ``hours`` when given) and the forecaster its replays use:
    the peak forecaster needs more than 2 h of history to fit, so a short window uses the seasonal
    naive one (said in the output)."""
    trace = load_trace_csv(_trace_file(data))
    if hours:
        trace = trace[trace.index < trace.index[0] + pd.Timedelta(hours=hours)]
    trace = trace.resample("1s").mean().interpolate()
    return trace, "peak" if len(trace) >= 3 * 3600 else "naive"
