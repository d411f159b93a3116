"""Demeter replayed as a chain of runs that share one profile database, against the measured runs of the same rank.

Use it from a fidelity benchmark (``benchmarks/fidelity/twin_fidelity.py --carry-profiles``,
``benchmarks/fidelity/demeter_trajectory.py --carry-profiles``): :func:`replay_chain` replays a model policy
``n`` times on the same trace, each run starting with the profiles the previous one ended with
(``prior_observations``, :func:`flinktune.replay.harness.prepare_replay`: not charged, no start-up
design); :func:`measured_runs` reads the folder's measured runs of a method one row per run, in
run order (rank 1, 2, ...), in the units of :func:`benchmarks.fidelity.measured_folder.measured_table`
(ratios to the measured static run). Whether the measured runs did share a database the folder does
not say: the chain is a hypothesis to test, not a fact about them.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from benchmarks.fidelity.measured_folder import relative_to_static
from flinktune.config_space import ConfigSpace, Configuration
from flinktune.replay.harness import PolicyRun, ReplaySettings, replay_policy
from flinktune.twin.profile import ClusterProfile

__all__ = ["measured_runs", "minutes_at_default", "replay_chain", "share_at_default"]


def _rank(name: str) -> int:
    m = re.match(r"(\d+)_", str(name))
    if m is None:
        raise ValueError(f"measured run {name!r}: its name does not start with the run number ('<n>_<method>_...')")
    return int(m.group(1))


def measured_runs(data: Path, method: str = "demeter", at_default: Mapping[int, float] | None = None) -> pd.DataFrame:
    """One row per measured run of ``method`` (``summary_per_run.csv``), indexed by rank (its run
    number), with ``run`` (the name), ``cpu``, ``memory``, ``p50``, ``p95``, ``p99`` relative to the
    static baseline of ``summary_by_method.csv``, ``slow_recoveries``, ``reconfigurations``, and where
    the folder has them ``profiling_cpu`` (``profiling_overhead.csv``, core-hours over static's) and
    ``at_default`` (share of minutes at the profiled space's maximum, per run number, when given;
    NaN for a run it does not name).
    ValueError when the folder has no per-run summary or no run of ``method``."""
    f = data / "summary_per_run.csv"
    if not f.exists():
        raise ValueError(f"{data}: no summary_per_run.csv, so no measured runs to compare a chain with")
    per_run = pd.read_csv(f).drop_duplicates(subset=["run", "method"])
    rows = per_run[per_run["method"] == method]
    if rows.empty:
        raise ValueError(f"{f}: no measured run of method {method!r} (has {sorted(per_run['method'].unique())})")
    base = pd.read_csv(data / "summary_by_method.csv").set_index("method").loc["baseline"]
    out = relative_to_static(rows, base).set_axis(pd.Index([_rank(r) for r in rows["run"]], name="rank"))
    out.insert(0, "run", rows["run"].to_numpy())
    prof = data / "profiling_overhead.csv"
    if prof.exists():
        cost = pd.read_csv(prof).set_index("run")
        hours = rows.set_index("run")["dur_h"]
        out["profiling_cpu"] = [
            float(cost.loc[r, "profiling_cpu_core_h"]) / (base["cpu_cores_mean"] * float(hours[r])) if r in cost.index else np.nan
            for r in out["run"]
        ]
        out["profiling_jobs"] = [float(cost.loc[r, "n_profiling_jobs"]) if r in cost.index else np.nan for r in out["run"]]
    if at_default:
        out["at_default"] = [at_default.get(k, np.nan) for k in out.index]
    return out.sort_index()


def minutes_at_default(minutes: pd.DataFrame, default: Configuration) -> pd.Series:
    """Per minute of a replay (``PolicyRun.minutes``, minutes without a configuration left out): whether
    it was spent wholly at ``default``'s CPU and memory."""
    m = minutes.dropna(subset=["total_cpu"])
    return ((m["total_cpu"] - default.total_cpu).abs() < 1e-6) & ((m["total_memory_mb"] - default.total_memory_mb).abs() < 1e-6)


def share_at_default(minutes: pd.DataFrame, default: Configuration) -> float:
    """Share of a replay's minutes (``PolicyRun.minutes``) spent wholly at ``default``'s CPU and memory."""
    at = minutes_at_default(minutes, default)
    return float(at.mean()) if len(at) else float("nan")


def replay_chain(
    name: str,
    trace: pd.Series,
    profile: ClusterProfile,
    space: ConfigSpace,
    settings: ReplaySettings,
    runs: int,
    *,
    policy_options: dict[str, Any] | None = None,
) -> list[PolicyRun]:
    """``runs`` replays of ``trace`` under model policy ``name``: the first from an empty database (the
    start-up design), each later one carrying the previous one's final observations. The twin's seed,
    failures and load are the same in every run, so the runs differ by the database alone."""
    if runs < 1:
        raise ValueError(f"replay chain: runs must be >= 1, got {runs}")
    chain: list[PolicyRun] = []
    prior: pd.DataFrame | None = None
    for _ in range(runs):
        run = replay_policy(name, trace, profile, space, settings, policy_options=policy_options, prior_observations=prior)
        chain.append(run)
        prior = run.observations
    return chain
