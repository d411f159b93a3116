"""Demeter's trajectory on the twin against the measured one: time at the default configuration,
returns to it, reconfigurations and the decision path of each change.

Use it to see *why* the replayed Demeter's memory and reconfigurations differ from the measured
runs (``benchmarks/fidelity/twin_fidelity.py`` gives the figures; this gives the path):

    python -m benchmarks.fidelity.demeter_trajectory --data ../shared/data/demeter-ads --seeds 7,8,9

The twin is calibrated as ``benchmarks/fidelity/twin_fidelity.py`` does it (``benchmarks/measured_folder.calibrated_twin``: the
mechanism fit and every calibration on the folder's measured methods, published targets), then
Demeter alone is replayed per seed. Per seed: the share of minutes at the default (maximum)
configuration, returns to it, memory and CPU reserved over the default's, changes by decision path
(``fallback``: bad current latency; ``no_feasible``: nothing meets the goals, go to the default;
``switch``: the ranking's pick), profiling decisions and runs. The measured side reads
``measured_60s/*_demeter_*.csv`` (``task_managers``, ``task_slots`` per minute; the default is the
profiled space's maximum, 24 TaskManagers x 1 slot here; minutes in a transition, with fractional
counts, are left out of the configuration sequence).

Both sides also give ``elevated_per_change``: per configuration change, the minutes from 2 before
to 6 after it whose latency is over 3x the run's median latency (what a change costs the latency,
the p95's main source once changes are frequent; :func:`elevated_minutes_per_change`).
Both sides also give ``first_move_min``, the minute of the first move away from the default (a
failure's fractional TaskManager count on the measured side is no move), and ``default_q1`` ..
``default_q4``: the share of minutes at the default in each quartile band of the trace's rate
(:func:`at_default_by_rate`; the measured minutes binned by their throughput).
``--method operator35`` reads another measured method's files for the measured side (its shares of
the default and returns mean little there).

``--redeploy-fit``: fit the redeploy's downtime and warm-up on the measured ``--method``'s own changes
(:func:`flinktune.calibration.redeploy_downtime.calibrate_downtime_on_folder` with ``method``; the twin's profile is
fitted on the operator's and Demeter's pooled) and print the note beside the twin's values, instead of replaying: what a
change of that method cost, measured (:func:`method_redeploy_fit`).

``--carry-profiles``: per seed, a chain of as many replays as the folder has measured Demeter runs,
each starting with the previous one's profiles (:mod:`benchmarks.fidelity.carried_profiles`); the rows gain
``run`` (the rank in the chain, to read beside the measured run of that number) and ``profiles_at_start``.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import pandas as pd

from benchmarks.fidelity.carried_profiles import minutes_at_default, replay_chain
from benchmarks.fidelity.measured_folder import calibrated_twin, failure_spec, replay_trace
from flinktune.calibration.mechanism import BAD_LATENCY_FACTOR
from flinktune.calibration.redeploy_downtime import calibrate_downtime_on_folder
from flinktune.config_space import Configuration, space_from_runs
from flinktune.replay.harness import PolicyRun, ReplaySettings, replay_policy
from flinktune.twin.profile import ClusterProfile

__all__ = [
    "RATE_BANDS",
    "at_default_by_rate",
    "decision_path",
    "elevated_minutes_per_change",
    "measured_trajectory",
    "method_redeploy_fit",
    "rate_edges",
    "twin_configs",
    "twin_cpu_per_tm_away",
    "twin_shapes",
    "twin_trajectory",
]


def elevated_minutes_per_change(latency: np.ndarray, changes: np.ndarray, *, before: int = 2, after: int = 6) -> float:
    """Mean over the changes (minute indices into ``latency``, one value a minute) of the minutes in
    ``[change - before, change + after)`` whose latency is over 3x the median of ``latency``; NaN
    without a change. Overlapping windows count a minute once per change."""
    lat = np.asarray(latency, dtype=float)
    if len(changes) == 0 or not np.isfinite(lat).any():
        return float("nan")
    high = lat > 3.0 * np.nanmedian(lat)
    return float(np.mean([high[max(int(c) - before, 0) : int(c) + after].sum() for c in changes]))


#: Quantiles of the folder's trace rate that split the minutes into rate bands (quartiles).
RATE_BANDS: tuple[float, ...] = (0.25, 0.5, 0.75)


def rate_edges(data: Path, hours: float | None = None) -> np.ndarray:
    """The inner limits (rec/s) of the rate bands: :data:`RATE_BANDS` quantiles of the folder's trace,
    the same for the twin and the measured side."""
    trace, _ = replay_trace(data, hours)
    return np.quantile(trace.to_numpy(dtype=float), RATE_BANDS)


def at_default_by_rate(rate: np.ndarray, at_default: np.ndarray, edges: np.ndarray) -> dict[str, float]:
    """Share of minutes at the default in each rate band (``default_q1`` lowest rates ..), the minutes
    binned by their ``rate`` at ``edges``; NaN for a band without minutes. Where the time at the default
    is spent says which rates a policy cannot serve cheaper."""
    rate, at = np.asarray(rate, dtype=float), np.asarray(at_default, dtype=bool)
    band = np.searchsorted(edges, rate, side="right")
    return {
        f"default_q{b + 1}": float(at[band == b].mean()) if (band == b).any() else float("nan") for b in range(len(edges) + 1)
    }


def decision_path(d: dict) -> str:
    """The path of one recorded Demeter decision (its reason's wording in flinktune.policies.demeter)."""
    r = d["reason"]
    if d["action"] == "profile":
        return "profile"
    if "fallback" in r:
        return "fallback"
    if "no configuration meets" in r:
        return "no_feasible"
    if "lowest usage" in r:
        return "switch"
    return "other"


def twin_trajectory(data: Path, seeds: list[int], hours: float | None = None, *, carry: bool = False) -> pd.DataFrame:
    """One row per seed, or with ``carry`` one per seed and rank of its chain (see the module docstring)."""
    n_runs = len(measured_trajectory(data)) if carry else 1
    if carry and n_runs == 0:
        raise ValueError(f"{data}: no measured Demeter run (measured_60s/*_demeter_*.csv), so no chain length")
    runs_csv = pd.read_csv(data / "profiling_runs.csv")
    space = space_from_runs(runs_csv)
    cal = calibrated_twin(data, runs_csv, ClusterProfile.default("ysb"), space)
    profile, options = cal.profile, cal.options
    trace, forecaster = replay_trace(data, hours)
    failures, _ = failure_spec(data)
    target = BAD_LATENCY_FACTOR * float(runs_csv["latency_ms"].min())
    mx = space.maximum
    edges = rate_edges(data, hours)
    rows = []
    for seed in seeds:
        st = ReplaySettings(
            workload="ads",
            failures=failures,
            seed=seed,
            forecaster=forecaster,
            latency_target_ms=target,
        )
        chain: list[PolicyRun] = (
            replay_chain("demeter", trace, profile, space, st, n_runs, policy_options=options.get("demeter"))
            if carry
            else [replay_policy("demeter", trace, profile, space, st, policy_options=options.get("demeter"))]
        )
        for rank, run in enumerate(chain, 1):
            rows.append(
                {
                    "seed": seed,
                    **({"run": rank, "profiles_at_start": run.prior_profiles} if carry else {}),
                    **_row(run, mx, edges),
                }
            )
    return pd.DataFrame(rows)


def _row(run: PolicyRun, mx: Configuration, edges: np.ndarray) -> dict:
    """One replay's trajectory figures (see the module docstring)."""
    m = run.minutes.dropna(subset=["total_cpu"])
    at_default = minutes_at_default(run.minutes, mx)
    t0 = float(pd.Timestamp(run.minutes.index[0]).timestamp())
    moves = [
        float(d["ts"]) for d in run.decisions if d["changed"] and d.get("target") and Configuration.from_dict(d["target"]) != mx
    ]
    paths = pd.Series([decision_path(d) for d in run.decisions], dtype=object)
    changed = pd.Series([decision_path(d) for d in run.decisions if d["changed"]], dtype=object)
    return {
        "at_default": float(at_default.mean()),
        "returns": int((at_default.to_numpy()[1:] & ~at_default.to_numpy()[:-1]).sum()),
        "memory": float(m["total_memory_mb"].mean() / mx.total_memory_mb),
        "cpu": float(m["total_cpu"].mean() / mx.total_cpu),
        "changes": len(changed),
        "elevated_per_change": _twin_elevated(run),
        **{f"by_{k}": int((changed == k).sum()) for k in ("fallback", "no_feasible", "switch")},
        "profile_decisions": int((paths == "profile").sum()),
        "profiling_runs": int(run.summary.get("profiling_runs", 0)),
        **_away(float(at_default.mean()), float(m["total_cpu"].mean()), float(m["total_memory_mb"].mean()), mx),
        "cpu_per_tm_away": twin_cpu_per_tm_away(run, mx),
        "first_move_min": (min(moves) - t0) / 60.0 if moves else float("nan"),
        **at_default_by_rate(m.loc[at_default.index, "rate"].to_numpy(), at_default.to_numpy(), edges),
        "shapes": twin_shapes(run, mx),
    }


def _away(at_default: float, cpu: float, memory_mb: float, mx: Configuration) -> dict[str, float]:
    """CPU and memory reserved over the default's in the minutes *away* from the default, from the
    run's means and its share at the default (the blend ``share + (1 - share) x away``)."""
    if at_default >= 1.0:
        return {"cpu_away": float("nan"), "memory_away": float("nan")}
    return {
        "cpu_away": (cpu / mx.total_cpu - at_default) / (1.0 - at_default),
        "memory_away": (memory_mb / mx.total_memory_mb - at_default) / (1.0 - at_default),
    }


def twin_configs(run: PolicyRun, mx: Configuration) -> pd.Series:
    """Minutes spent in each configuration of a replay (index: ``Configuration``), from the changed
    decisions' targets; the run starts at ``mx`` (Demeter's default) and a change counts from its
    decision (the redeploy's own minutes go to the new configuration)."""
    t0 = float(pd.Timestamp(run.minutes.index[0]).timestamp())
    t1 = t0 + 60.0 * len(run.minutes)
    marks = [(t0, mx)] + [
        (float(d["ts"]), Configuration.from_dict(d["target"])) for d in run.decisions if d["changed"] and d.get("target")
    ]
    spent: dict[Configuration, float] = {}
    for (a, cfg), (b, _) in zip(marks, [*marks[1:], (t1, mx)]):
        spent[cfg] = spent.get(cfg, 0.0) + max(b - a, 0.0) / 60.0
    return pd.Series(spent, dtype=float)


def twin_cpu_per_tm_away(run: PolicyRun, mx: Configuration) -> float:
    """Minute-weighted CPU per TaskManager away from the default (the measured side's is inferred
    from its cores and TaskManagers; see :func:`measured_trajectory`)."""
    spent = twin_configs(run, mx)
    away = spent[[c != mx for c in spent.index]]
    if away.sum() <= 0:
        return float("nan")
    return float(sum(c.total_cpu * w for c, w in away.items()) / sum(c.taskmanagers * w for c, w in away.items()))


def twin_shapes(run: PolicyRun, mx: Configuration) -> str:
    """The most frequent shapes of a replay, ``<TaskManagers>x<slots> <cpu>c<GiB>g`` with their share of minutes."""
    spent = twin_configs(run, mx)
    by: dict[str, float] = {}
    for c, w in spent.items():
        k = f"{c.taskmanagers}x{c.task_slots} {c.cpu:g}c{c.memory_mb / 1024:g}g"
        by[k] = by.get(k, 0.0) + w
    top = sorted(by.items(), key=lambda kv: -kv[1])[:4]
    return ", ".join(f"{k} {v / spent.sum():.0%}" for k, v in top)


def measured_trajectory(data: Path, method: str = "demeter") -> pd.DataFrame:
    """One row per measured run of ``method`` (``measured_60s/*_<method>_*.csv``): share of minutes at
    the default, returns to it (between whole-number configurations), configuration changes (same),
    latency-elevated minutes per change and the most frequent shapes. The default is the profiled
    space's maximum (Demeter's default is its largest configuration)."""
    mx = space_from_runs(pd.read_csv(data / "profiling_runs.csv")).maximum
    summary = _measured_summary(data)
    try:
        edges: np.ndarray | None = rate_edges(data)
    except FileNotFoundError:  # a folder of measured runs without its trace: no rate bands
        edges = None
    default_shape = f"{mx.taskmanagers}x{mx.task_slots}"
    rows = []
    for f in sorted((data / "measured_60s").glob(f"*_{method}_*.csv")):
        d = pd.read_csv(f).dropna(subset=["task_managers", "task_slots"]).reset_index(drop=True)
        tm, sl = d["task_managers"].to_numpy(), d["task_slots"].to_numpy()
        whole = (tm == np.round(tm)) & (sl == np.round(sl)) & (tm > 0)
        # "<TaskManagers>x<slots per TaskManager>" on whole-number minutes; a transition's fractional
        # minutes carry the last shape, so a change is dated at the first minute of the new one.
        full = pd.Series([f"{int(a)}x{int(round(b / a))}" if w else None for a, b, w in zip(tm, sl, whole)], dtype=object)
        seq = full[whole].reset_index(drop=True)
        runs = seq[seq != seq.shift()]
        default = (tm == mx.taskmanagers) & (sl == mx.taskmanagers * mx.task_slots)
        full = full.ffill()
        change_at = np.flatnonzero((full != full.shift()).to_numpy() & full.shift().notna().to_numpy())
        latency = d["latency"].to_numpy(dtype=float) if "latency" in d else np.full(len(d), np.nan)
        run_id = f.name.split("_")[0]
        means = summary.get(f.stem)
        away = _away(float(default.mean()), means["cpu_cores_mean"], means["mem_gib_mean"] * 1024, mx) if means else {}
        tm_away = float(tm[~default].mean()) if (~default).any() else float("nan")
        # The first whole-number minute away from the default: a failure's partitioned TaskManager shows
        # as a fractional count for a minute or two and is no move.
        moved = np.flatnonzero(whole & ~default)
        rows.append(
            {
                "run": run_id,
                **away,
                # Cores per TaskManager away from the default: the cores the summary reserves beyond the
                # default's minutes over the minutes' mean TaskManagers (the per-minute files hold no CPU).
                "cpu_per_tm_away": away["cpu_away"] * mx.total_cpu / tm_away if away else float("nan"),
                "at_default": float(default.mean()),
                "returns": int((runs.iloc[1:] == default_shape).sum()),
                "changes": len(runs) - 1,
                "elevated_per_change": elevated_minutes_per_change(latency, change_at),
                "first_move_min": float(moved[0]) if len(moved) else float("nan"),
                # The measured minutes' rate is their throughput (the files hold no input rate).
                **(
                    at_default_by_rate(d["throughput"].to_numpy(dtype=float), default, edges)
                    if "throughput" in d and edges is not None
                    else {}
                ),
                "shapes": ", ".join(f"{k} {v / len(seq):.0%}" for k, v in seq.value_counts().head(4).items()),
            }
        )
    return pd.DataFrame(rows)


def _measured_summary(data: Path) -> dict[str, dict[str, float]]:
    """``summary_per_run.csv``'s reserved CPU cores and memory (GiB) means by run name (the
    measured file's stem); empty when the folder has no summary."""
    path = data / "summary_per_run.csv"
    if not path.exists():
        return {}
    d = pd.read_csv(path)
    if not {"run", "cpu_cores_mean", "mem_gib_mean"} <= set(d.columns):
        return {}
    return {
        str(r["run"]): {"cpu_cores_mean": float(r["cpu_cores_mean"]), "mem_gib_mean": float(r["mem_gib_mean"])}
        for _, r in d.iterrows()
    }


def method_redeploy_fit(data: Path, method: str = "demeter") -> str:
    """The redeploy downtime and warm-up fitted on ``method``'s measured changes (the backlog after its
    scale-downs, as the twin's own fit reads the operator's), starting from the benchmark's calibrated
    twin, with the twin's own (pooled) values beside: one line of text."""
    runs_csv = pd.read_csv(data / "profiling_runs.csv")
    space = space_from_runs(runs_csv)
    profile = calibrated_twin(data, runs_csv, ClusterProfile.default("ysb"), space).profile
    fit = calibrate_downtime_on_folder(data, profile, space.maximum, warmup_on_backlog=True, method=method)
    return (
        f"the twin's (fitted on the pooled scale-downs): redeploy_base_s {profile.redeploy_base_s:g}, redeploy_warmup_s "
        f"{profile.redeploy_warmup_s}; fitted on {method}'s own changes: {fit.note}"
    )


def _twin_elevated(run: PolicyRun) -> float:
    """:func:`elevated_minutes_per_change` of a replay (its minutes and its changed decisions)."""
    minutes = run.minutes.reset_index()
    t0 = pd.Timestamp(minutes["ts"].iloc[0]).timestamp()
    at = [int((float(d["ts"]) - t0) // 60) for d in run.decisions if d["changed"]]
    return elevated_minutes_per_change(minutes["latency_p95_ms"].to_numpy(dtype=float), np.array(at, dtype=int))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path, required=True)
    ap.add_argument("--seeds", default="7,8,9")
    ap.add_argument("--hours", type=float, default=None, help="Replay only the first hours (quick check).")
    ap.add_argument("--method", default="demeter", help="Measured method whose runs are read (default demeter; e.g. operator35).")
    ap.add_argument(
        "--redeploy-fit",
        action="store_true",
        help="Fit the redeploy's downtime and warm-up on --method's measured changes and print it (no replay).",
    )
    ap.add_argument(
        "--carry-profiles",
        action="store_true",
        help="Per seed, a chain of as many replays as measured Demeter runs, each carrying the previous one's profiles.",
    )
    a = ap.parse_args(argv)
    if a.redeploy_fit:
        print(method_redeploy_fit(a.data, a.method))
        return 0
    with pd.option_context("display.width", 200, "display.max_columns", 20):
        print(f"measured ({a.method})\n", measured_trajectory(a.data, a.method).to_string(index=False))
        tw = twin_trajectory(a.data, [int(s) for s in a.seeds.split(",")], a.hours, carry=a.carry_profiles)
        print("twin\n", tw.to_string(index=False))
        if a.carry_profiles:
            print(
                "twin mean per run of the chain\n",
                tw.drop(columns="seed").groupby("run").mean(numeric_only=True).round(3).to_string(),
            )
        print("twin mean\n", tw.drop(columns=["seed", "run"], errors="ignore").mean(numeric_only=True).round(3).to_string())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
