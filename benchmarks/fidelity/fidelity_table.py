"""The twin-against-measured tables of ``benchmarks/fidelity/twin_fidelity.py``: one replay's figures relative to
static (:func:`replayed_table`), the comparison with the measured methods and their targets (:func:`compare`),
and the per-rank comparison of a carried Demeter chain (:func:`rank_table`).

Use them on :class:`~flinktune.replay.harness.PolicyRun` replays keyed by policy name (``static`` among them)
and on ``benchmarks.fidelity.measured_folder.measured_table``'s frame (one row per method in :data:`METHODS`).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from benchmarks.fidelity.carried_profiles import share_at_default
from benchmarks.fidelity.measured_folder import METHODS
from flinktune.replay.metrics import relative_table

__all__ = [
    "CARRIED",
    "TOLERANCES",
    "TWIN_MEASURES",
    "compare",
    "rank_table",
    "replayed_table",
    "with_default",
    "within_tolerance",
]

#: The policy whose replay ``--carry-profiles`` chains (the one with a measured profile database).
CARRIED = "demeter"
#: Figures the twin measures its own way, reported beside the measured figure they stand for (no target).
TWIN_MEASURES = {"slow_recoveries_twin_measure": "slow_recoveries", "p95_every_second": "p95"}
#: The replay targets on resources and latency, figure -> (kind, tolerance): "abs", within +-tolerance of
#: the measured figure; "factor", within that factor of it either way.
TOLERANCES = {
    "cpu": ("abs", 0.08),
    "memory": ("abs", 0.08),
    "p50": ("factor", 2.0),
    "p95": ("factor", 2.0),
    "p99": ("factor", 2.0),
}


def within_tolerance(figure: str, twin: float, measured: float) -> bool:
    """Whether ``twin`` meets the target of ``figure`` (a key of :data:`TOLERANCES`) against ``measured``."""
    kind, tol = TOLERANCES[figure]
    if kind == "abs":
        return abs(twin - measured) <= tol
    return twin > 0 and measured > 0 and max(twin / measured, measured / twin) <= tol


def replayed_table(runs: dict, recovery_limit_s: float = 180.0) -> pd.DataFrame:
    """Policies x figures of one seed's replays (``runs``: policy name -> PolicyRun, ``static`` among them):
    CPU and memory relative to static less the profiling charge, latency relative to static as the measured
    metric reports it, slow recoveries as Demeter's detector counts them, reconfigurations, profiling CPU."""
    rel = relative_table({k: v.summary for k, v in runs.items()})
    static_cpu = runs["static"].summary["cpu_core_hours"]
    # Slow recoveries as the measured ones were taken (Demeter's detector); the twin's own beside them.
    detector = pd.Series({k: float((v.recoveries["detector_recovery_s"] > recovery_limit_s).sum()) for k, v in runs.items()})
    # Latency as the measured runs' metric reports it (a running job's p95 histogram, its samples'
    # quantiles: flinktune.replay.metrics.observed_latency); the twin's every-second p95 is reported beside.
    observed = pd.DataFrame(
        {k: {c: v.summary[f"observed_latency_{c}_ms"] for c in ("p50", "p95", "p99")} for k, v in runs.items()}
    ).T
    observed = observed / observed.loc["static"]
    return pd.DataFrame(
        {
            "cpu": rel["cpu_core_hours"] - rel["profiling_cpu_core_hours"] / static_cpu,
            "memory": rel["memory_gib_hours"] - rel["profiling_memory_gib_hours"] / runs["static"].summary["memory_gib_hours"],
            "p50": observed["p50"],
            "p95": observed["p95"],
            "p99": observed["p99"],
            "p95_every_second": rel["latency_p95_ms"],
            "slow_recoveries": detector,
            "slow_recoveries_twin_measure": rel["recoveries_over_limit"],
            "reconfigurations": rel["reconfigurations"],
            "profiling_cpu": rel["profiling_cpu_core_hours"] / static_cpu,
        }
    )


def compare(replayed: pd.DataFrame, measured: pd.DataFrame) -> pd.DataFrame:
    """One row per (policy, figure): twin, measured, the target and whether it is met."""
    rows: list[tuple[str, str, float, float, str, bool | None]] = []
    pols = [p for p in METHODS if p in replayed.index]
    for pol in pols:
        for fig in (
            "cpu",
            "memory",
            "p50",
            "p95",
            "p99",
            "p95_every_second",
            "slow_recoveries",
            "slow_recoveries_twin_measure",
            "reconfigurations",
            "profiling_cpu",
            "at_default",
        ):
            if fig in TWIN_MEASURES and fig in replayed.columns:
                rows.append(
                    (pol, fig, float(replayed.loc[pol, fig]), float(measured.loc[pol, TWIN_MEASURES[fig]]), "(reported)", None)
                )
                continue
            if fig not in measured.columns or fig not in replayed.columns:
                continue
            if fig == "at_default":  # measured for Demeter only (its trajectory); reported, not a target
                if np.isfinite(float(measured.loc[pol, fig])):
                    rows.append((pol, fig, float(replayed.loc[pol, fig]), float(measured.loc[pol, fig]), "(reported)", None))
                continue
            t, m = float(replayed.loc[pol, fig]), float(measured.loc[pol, fig])
            if not np.isfinite(m):
                rows.append((pol, fig, t, m, "not measured", None))
                continue
            if fig in TOLERANCES:
                kind, tol = TOLERANCES[fig]
                target, ok = f"within +-{tol:g}" if kind == "abs" else f"within {tol:g}x", within_tolerance(fig, t, m)
            elif fig == "profiling_cpu":
                target, ok = "(reported)", None
            else:
                target, ok = "+-50 % or +-2", abs(t - m) <= max(2.0, 0.5 * m)
            rows.append((pol, fig, t, m, target, ok))
    out = pd.DataFrame(rows, columns=["policy", "figure", "twin", "measured", "target", "met"])
    for fig in ("cpu", "p95") if pols == list(METHODS) else ():
        same = list(replayed[fig].rank().loc[list(METHODS)]) == list(measured[fig].rank().loc[list(METHODS)])
        order_t = " < ".join(replayed[fig].sort_values().index)
        order_m = " < ".join(measured[fig].sort_values().index)
        out.loc[len(out)] = ("all", f"ranking on {fig}", order_t, order_m, "same order", same)
    return out


def with_default(table: pd.DataFrame, runs: dict, default) -> pd.DataFrame:
    """``table`` with ``at_default``: each replay's share of minutes at the default (space maximum)."""
    table["at_default"] = [share_at_default(runs[p].minutes, default) for p in table.index]
    return table


def rank_table(per_rank: pd.DataFrame, measured: pd.DataFrame) -> pd.DataFrame:
    """Per rank of the chain: the twin's mean over seeds (and range) against the measured run of that rank."""
    out = []
    for rank, rows in per_rank.groupby("rank"):
        twin = rows.drop(columns=["seed", "rank"]).mean().to_frame(CARRIED).T
        meas = measured.loc[[rank]].drop(columns=["run"]).rename(index={rank: CARRIED})
        table = compare(twin, meas)
        for extra in ("profiles_at_start", "profiling_runs"):
            m = float(meas.loc[CARRIED, "profiling_jobs"]) if extra == "profiling_runs" and "profiling_jobs" in meas else np.nan
            table.loc[len(table)] = (CARRIED, extra, float(twin.loc[CARRIED, extra]), m, "(reported)", None)
        table["seed range"] = [f"{rows[f].min():.3f}-{rows[f].max():.3f}" if f in rows.columns else "" for f in table["figure"]]
        table.insert(0, "rank", rank)
        out.append(table.drop(columns=["policy"]))
    return pd.concat(out, ignore_index=True)
