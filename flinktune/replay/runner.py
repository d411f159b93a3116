"""Run every policy on one trace, in parallel processes, with a progress bar; the CLI's entry point.

Use :func:`cli_replay` from the command line wrapper (``flinktune replay``) and
:func:`run_replay` from code. ``trace`` is ``ysb``, ``tsw`` (the seeded 18 h generators) or a
CSV file (``timestamp,value``); its dataflow is then ``ysb`` unless ``workload`` says otherwise.
"""

from __future__ import annotations

import math
import multiprocessing
import os
import sys
import time
from collections.abc import Hashable, Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path
from typing import Any, TextIO, TypeVar

import pandas as pd

from flinktune.config_space import ConfigSpace, default_space
from flinktune.policies import MODEL_POLICIES, POLICY_NAMES
from flinktune.quantities import DURATION_S, LATENCY_MS, RECOVERY_S, check, finite
from flinktune.replay.harness import PolicyRun, ReplaySettings, replay_policy
from flinktune.replay.models import FORECASTERS
from flinktune.replay.output import write_results
from flinktune.replay.policy_options import check_policy_options, describe_policy_options
from flinktune.twin.failures import parse_failures
from flinktune.twin.profile import ClusterProfile
from flinktune.twin.workload import WORKLOADS, generate_trace, load_trace_csv

K = TypeVar("K", bound=Hashable)

__all__ = [
    "FORECAST_POLICIES",
    "SHIPPED_PROFILES",
    "check_forecaster",
    "cli_replay",
    "load_replay_trace",
    "load_with_history",
    "resolve_policies",
    "resolve_profile",
    "run_replay",
    "run_replays",
    "split_history",
]

#: The policies that plan from a forecast (the replay trains ``--forecaster`` for them).
FORECAST_POLICIES: frozenset[str] = MODEL_POLICIES | {"barre"}
DEFAULT_FORECASTER = ReplaySettings.__dataclass_fields__["forecaster"].default

#: Calibrated profiles shipped beside the built-in ones (name -> file).
SHIPPED_PROFILES: dict[str, Path] = {"ads": Path(__file__).resolve().parents[1] / "resources" / "cluster_profile_ads.yaml"}


def resolve_policies(policies: str | Sequence[str]) -> list[str]:
    """``"all"`` or a comma-separated list; static is always included (the reference)."""
    names = (
        list(POLICY_NAMES)
        if policies == "all"
        else [p.strip() for p in (policies.split(",") if isinstance(policies, str) else policies) if p.strip()]
    )
    if not names:
        raise ValueError(f"--policies {policies!r}: no policy named; give some of {', '.join(POLICY_NAMES)} or 'all'")
    unknown = [p for p in names if p not in POLICY_NAMES]
    if unknown:
        raise ValueError(f"--policies: unknown policy(ies) {unknown}; known: {', '.join(POLICY_NAMES)} or 'all'")
    return ["static"] + [p for p in dict.fromkeys(names) if p != "static"]


def check_forecaster(forecaster: str, names: Sequence[str]) -> None:
    """ValueError for an unknown forecaster, or one other than the default when none of the replayed
    policies (``names``) uses a forecaster, so the option would change nothing."""
    if forecaster not in FORECASTERS:
        raise ValueError(f"--forecaster {forecaster!r}: unknown; known: {', '.join(FORECASTERS)}")
    users = [n for n in names if n in FORECAST_POLICIES]
    if forecaster != DEFAULT_FORECASTER and not users:
        raise ValueError(
            f"--forecaster {forecaster}: none of the replayed policies ({', '.join(names)}) uses a forecaster; "
            f"add one of {', '.join(sorted(FORECAST_POLICIES))} to --policies or drop --forecaster"
        )


def load_replay_trace(trace: str, hours: float, seed: int) -> tuple[pd.Series, str]:
    """(rate series at 1 s, workload name) for a built-in kind or a CSV path (cut to ``hours``)."""
    if trace in WORKLOADS:
        return generate_trace(trace, hours, seed), trace
    path = Path(trace)
    if not path.exists():
        raise FileNotFoundError(f"--trace {trace!r}: neither a built-in workload ({', '.join(WORKLOADS)}) nor an existing file")
    series = load_trace_csv(path)
    span_h = (series.index[-1] - series.index[0]).total_seconds() / 3600
    # A minute of slack: a trace "of 2 h" often ends on its last whole step before the 2 h mark.
    if span_h < hours - 1 / 60:
        raise ValueError(
            f"--trace {trace}: the file covers {span_h:.2f} h, less than the {hours:g} h to replay (--hours plus "
            f"--history-hours); pass --hours {math.floor(span_h * 100) / 100:g} or less, or a longer trace"
        )
    series = series[series.index < series.index[0] + pd.Timedelta(hours=hours)]
    full = series.resample("1s").mean().interpolate()
    return full, "ysb"


def split_history(series: pd.Series, history_hours: float) -> tuple[pd.Series | None, pd.Series]:
    """(history, replayed span) of a trace file's ``series``: its first ``history_hours`` and the rest.

    Use it to fit the forecasters on the trace's own past (``ReplaySettings.history``) instead of a
    synthetic day: the replay, the static reference and the bound then all cover the replayed span
    only, so the forecaster never sees what it is asked about. 0 hours: (None, the whole series).
    """
    if history_hours < 0:
        raise ValueError(f"--history-hours must be >= 0, got {history_hours}")
    if history_hours == 0:
        return None, series
    cut = series.index[0] + pd.Timedelta(hours=history_hours)
    history, replayed = series[series.index < cut], series[series.index >= cut]
    if replayed.empty:
        raise ValueError(
            f"--history-hours {history_hours:g}: the trace has only {len(series) / 3600:.1f} h, nothing is left to replay"
        )
    return history, replayed


def load_with_history(trace: str, hours: float, seed: int, history_hours: float = 0.0) -> tuple[pd.Series | None, pd.Series, str]:
    """(history, replayed span of ``hours``, workload): :func:`load_replay_trace` then :func:`split_history`.

    ``history_hours`` > 0 needs a trace file (a generator's history is its own preceding day)."""
    if history_hours and trace in WORKLOADS:
        raise ValueError(
            f"--history-hours applies to trace files; {trace!r} is a generator, whose forecasters "
            "already fit on a preceding generated day"
        )
    series, workload = load_replay_trace(trace, hours + history_hours, seed)
    history, replayed = split_history(series, history_hours)
    return history, replayed, workload


class _Progress:
    """A one-line text progress bar on ``stream`` (no dependency)."""

    def __init__(self, total: int, stream: TextIO | None = None) -> None:
        # sys.stderr is read now, not at import: a caller (the CLI's test runner) may have swapped it since.
        self.total, self.done, self.stream, self.t0 = total, 0, stream or sys.stderr, time.perf_counter()

    def step(self, label: str) -> None:
        self.done += 1
        width = 30
        fill = int(width * self.done / self.total)
        self.stream.write(
            f"\r[{'#' * fill}{'.' * (width - fill)}] {self.done}/{self.total} {label:<12} {time.perf_counter() - self.t0:5.0f} s"
        )
        if self.done == self.total:
            self.stream.write("\n")
        self.stream.flush()


def resolve_profile(profile: str | Path | None, workload: str) -> ClusterProfile:
    """The cluster profile for ``--profile``: none (the built-in one for ``workload``), a shipped
    name (``ysb``, ``tsw``, or ``ads``: calibrated on Demeter's real ADS runs) or a profile YAML path."""
    if profile is None or str(profile) in WORKLOADS:
        return ClusterProfile.default(str(profile) if profile is not None else workload)
    if str(profile) in SHIPPED_PROFILES:
        return ClusterProfile.from_yaml(SHIPPED_PROFILES[str(profile)])
    path = Path(profile)
    if not path.exists():
        raise FileNotFoundError(
            f"--profile {profile!r}: neither a shipped profile ({', '.join([*WORKLOADS, *SHIPPED_PROFILES])}) nor an existing file"
        )
    return ClusterProfile.from_yaml(path)


def _one(
    name: str,
    trace: pd.Series,
    profile: ClusterProfile,
    space: ConfigSpace,
    settings: ReplaySettings,
    options: dict[str, Any] | None = None,
    start_state: dict[str, Any] | None = None,
) -> PolicyRun:
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    return replay_policy(name, trace, profile, space, settings, policy_options=options, start_state=start_state)


def run_replay(
    trace: pd.Series,
    workload: str,
    policies: Sequence[str],
    settings: ReplaySettings,
    *,
    workers: int = 2,
    progress: TextIO | bool | None = True,
    space: ConfigSpace | None = None,
    profile: ClusterProfile | None = None,
    policy_options: dict[str, dict[str, Any]] | None = None,
    start_state: dict[str, Any] | None = None,
) -> dict[str, PolicyRun]:
    """Replay every policy on ``trace``; ``workers`` > 1 uses spawned processes (a script that calls this at
    import needs the ``if __name__ == "__main__":`` guard). Result ordered as ``policies``.

    ``profile`` is the twin's cluster profile (default: the built-in one for ``workload``).
    ``policy_options``: keyword options per policy name (e.g. ``{"reactive": {"target_utilization": 0.35}}``);
    ``start_state`` the state every policy starts from (default static max; :func:`prepare_replay`).
    ``progress``: a stream for the progress bar, True for standard error (read at call time), None or False for none.
    """
    options = policy_options or {}
    jobs = {name: (name, settings, options.get(name)) for name in policies}
    runs = run_replays(
        trace, jobs, workload=workload, workers=workers, progress=progress, space=space, profile=profile, start_state=start_state
    )
    return {p: runs[p] for p in policies}


def run_replays(
    trace: pd.Series,
    jobs: Mapping[K, tuple[str, ReplaySettings, dict[str, Any] | None]],
    *,
    workload: str = "ysb",
    workers: int = 2,
    progress: TextIO | bool | None = True,
    space: ConfigSpace | None = None,
    profile: ClusterProfile | None = None,
    start_state: dict[str, Any] | None = None,
) -> dict[K, PolicyRun]:
    """Many replays of ``trace`` on one pool: ``jobs`` maps a key (e.g. ``(seed, policy)``) to
    (policy name, its settings, its options or None). Use it for a benchmark over several seeds, so
    that a slow policy's seeds run side by side instead of one seed's policies at a time. Result
    ordered as ``jobs``; ``workers``, ``progress``, ``space``, ``profile`` and ``start_state`` as
    in :func:`run_replay`."""
    prof = profile or ClusterProfile.default(workload)
    space = space or default_space()
    bar = None
    if progress is True:
        bar = _Progress(len(jobs))
    elif progress:
        bar = _Progress(len(jobs), progress)
    runs: dict[K, PolicyRun] = {}
    # Slowest first so the processes finish together.
    order = sorted(jobs, key=lambda k: {"demeter": 0, "flinktune": 1}.get(jobs[k][0], 2))
    if workers <= 1 or len(jobs) <= 1:  # one replay: in this process (a spawned worker would import everything again)
        for key in order:
            name, st, opts = jobs[key]
            runs[key] = replay_policy(name, trace, prof, space, st, policy_options=opts, start_state=start_state)
            if bar:
                bar.step(_label(key))
    else:
        # Spawned, not forked: the caller may hold threads (Spark's gateway, Airflow's in-process API in
        # the local runner's child), and a forked child can hang on a lock one of them held.
        with ProcessPoolExecutor(max_workers=workers, mp_context=multiprocessing.get_context("spawn")) as pool:
            futures = {
                pool.submit(_one, jobs[key][0], trace, prof, space, jobs[key][1], jobs[key][2], start_state): key for key in order
            }
            for fut in as_completed(futures):
                runs[futures[fut]] = fut.result()
                if bar:
                    bar.step(_label(futures[fut]))
    return {k: runs[k] for k in jobs}


def _label(key: Hashable) -> str:
    return " ".join(map(str, key)) if isinstance(key, tuple) else str(key)


def cli_replay(
    trace: str = "ysb",
    policies: str = "all",
    hours: float = 18.0,
    failures: str = "every:45m",
    seed: int = 7,
    out_dir: str | Path = "var/replay",
    *,
    forecaster: str = "peak",
    latency_target_ms: float = 1000.0,
    recovery_limit_s: float = 180.0,
    workers: int = 2,
    plots: bool = True,
    command: str | None = None,
    profile: str | None = None,
    history_hours: float = 0.0,
    watch_every_s: int = 60,
    policy_options: dict[str, dict[str, float]] | None = None,
) -> dict[str, Any]:
    """The ``flinktune replay`` command: run, write table + JSON + plots, return a summary dict.

    ``history_hours`` (trace files only): the file's first hours are the forecasters' history and
    ``hours`` after them are replayed (:func:`split_history`); 0 fits them on a synthetic day.
    ``policy_options`` (``{policy: {constructor argument: value}}``, from
    :func:`~flinktune.replay.policy_options.parse_policy_options`) set a baseline to its published
    setting; they are checked against the replayed policies before any work."""
    if not hours > 0:
        raise ValueError(f"--hours must be > 0, got {hours}")
    check(DURATION_S, hours * 3600, "--hours (as seconds)")
    check(LATENCY_MS, latency_target_ms, "--latency-target-ms")
    check(RECOVERY_S, recovery_limit_s, "recovery limit")
    finite(history_hours, "--history-hours")
    parse_failures(failures)  # a bad spec fails before any work
    names = resolve_policies(policies)
    check_forecaster(forecaster, names)
    options = policy_options or {}
    check_policy_options(options, names)
    history, series, workload = load_with_history(trace, hours, seed, history_hours)
    prof = resolve_profile(profile, workload)
    settings = ReplaySettings(
        workload=workload,
        failures=failures,
        seed=seed,
        forecaster=forecaster,
        latency_target_ms=latency_target_ms,
        recovery_limit_s=recovery_limit_s,
        history=history,
        watch_every_s=watch_every_s,
    )
    t0 = time.perf_counter()
    runs = run_replay(series, workload, names, settings, workers=workers, profile=prof, policy_options=options)
    wall = time.perf_counter() - t0
    cmd = command or (
        f"flinktune replay --trace {trace} --policies {policies} --hours {hours:g} --failures {failures} --seed {seed}"
        f" --forecaster {forecaster} --out {out_dir}"
        + (f" --profile {profile}" if profile else "")
        + (f" --latency-target-ms {latency_target_ms:g}" if latency_target_ms != 1000.0 else "")
        + (f" --history-hours {history_hours:g}" if history_hours else "")
        + (f" --watch-every-s {watch_every_s}" if watch_every_s != 60 else "")
        + describe_policy_options(options)
    )
    meta = {
        "command": cmd,
        "trace": trace,
        "workload": workload,
        "hours": hours,
        "failures": failures,
        "seed": seed,
        "forecaster": forecaster,
        "latency_target_ms": latency_target_ms,
        "recovery_limit_s": recovery_limit_s,
        "watch_every_s": watch_every_s,
        "wall_s": round(wall, 1),
        "workers": workers,
        "profile": profile or workload,
        "history_hours": history_hours,
        "policy_options": options,
    }
    name = Path(trace).stem if trace not in WORKLOADS else trace
    paths = write_results(runs, out_dir, name, meta, plots=plots)
    return {"wall_s": wall, "paths": {k: str(v) for k, v in paths.items()}, "policies": names}
