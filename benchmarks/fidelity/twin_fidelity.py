"""Does the twin reproduce real measurements? Calibrate on a data folder, replay its trace, compare.

Use on any folder in the demeter-ads format (``../shared/data/demeter-ads/README.md``):

    python -m benchmarks.fidelity.twin_fidelity --data ../shared/data/demeter-ads --out docs/results/twin-fidelity-ads.md

1. Profiling runs, leave-one-run-out (``profiling_runs.csv``, column ``run``): the grey-box twin
   (:mod:`flinktune.calibration.grey_box`) fitted on the other runs predicts each run; scores against
   the leave-one-run-out targets, for the corrected twin and the mechanism alone.
2. Replay: the mechanism fitted on all runs replays static, demeter, autoscaler and reactive on the
   folder's trace (``trace_x3.csv``, or the first ``*.csv`` with ``timestamp,value``) with its
   failures (the median gap between injections in ``results_recovery_per_injection.csv``, else
   ``every:45m``), side by side with the measured means (``summary_by_method.csv``; profiling cost
   from ``profiling_overhead.csv``).

Calibrated on the folder too, when it has them: the twin's CPU per record on the static run's
measured CPU load (``measured_60s/*baseline*.csv``, :mod:`flinktune.calibration.cpu`), the
restart cost (warm-up, per-TaskManager restart time, pod start) on the measured reactive runs'
rescales (``measured_60s/*reactive*.csv``, :mod:`flinktune.calibration.restart`; the mechanism
is then refitted with those held, so that its recovery stage agrees with them), and the
utilisation target of the reactive HPA from the measured method's name (``reactive35`` -> 0.35;
none in the name: the policy's default), the downtime and warm-up of a savepoint redeploy on the
backlog after the measured operator runs' scale-downs (``measured_60s/*operator*.csv``,
:mod:`flinktune.calibration.redeploy_downtime`; ``--redeploy-fit`` for fits on the latency instead)
and the busy time the operator autoscaler reads on those runs' own rescale decisions
(:mod:`flinktune.calibration.busy`). The operator autoscaler replayed is the published version
``--operator`` names (default ``demeter-1.6``: operator 1.6.0 on Flink 1.17 with Demeter's settings,
the one measured; ``newest``: the 1.10+ behaviour the other replay tables use). Slow recoveries are
counted with the detector-like measure (:func:`flinktune.replay.metrics.detector_recovery_time`,
the way the measured ones were taken); the twin's own measure is reported beside it.

Nothing about the workload is built in: the configuration space is the set of knob values in the
profiling runs, and its maximum (most parallelism, one slot, least CPU, most memory, shortest
checkpoint interval) must match the static baseline's measured footprint (TaskManagers, cores and
GiB per TaskManager from ``summary_by_method.csv``); a mismatch is reported, not hidden.
``--hours``/``--rows`` cut the trace and the profiling runs for a quick check.

``--carry-profiles``: Demeter is replayed per seed as a chain of as many runs as the folder has
measured Demeter runs (``summary_per_run.csv``), each starting with the profile database the previous
run ended with (:mod:`benchmarks.fidelity.carried_profiles`); replay k is compared with measured run k, and the
chain's mean with the measured mean. The other policies are replayed once, as without it.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from benchmarks.fidelity.carried_profiles import measured_runs, replay_chain
from benchmarks.fidelity.demeter_trajectory import measured_trajectory
from benchmarks.fidelity.fidelity_table import CARRIED, compare, rank_table, replayed_table, with_default
from benchmarks.fidelity.measured_folder import (
    DEFAULT_OPERATOR,
    METHODS,
    OPERATOR_NOTES,
    calibrated_twin,
    failure_spec,
    fit_operator_noise,
    measured_table,
    replay_trace,
)
from flinktune.calibration.folder import REDEPLOY_FITS, REDEPLOY_METHODS
from flinktune.calibration.grey_box_scores import cross_validate
from flinktune.calibration.mechanism import BAD_LATENCY_FACTOR
from flinktune.calibration.observation_checks import screen_observations
from flinktune.config_space import space_from_runs
from flinktune.policies.autoscaler import VERSIONS
from flinktune.replay.harness import ReplaySettings
from flinktune.replay.runner import run_replays
from flinktune.twin.profile import ClusterProfile
from flinktune.twin.recovery_checks import DEMETER_CHECKS, on_schedule

__all__ = ["CV_TARGETS", "compare", "main", "render", "render_loro", "replayed_table", "run"]

#: Leave-one-run-out targets: (score, comparison, bound).
CV_TARGETS = {
    "throughput_mape": ("<=", 0.12),
    "keeps_up_accuracy": (">=", 0.90),
    "latency_class_accuracy": (">=", 0.85),
    "recovery_class_accuracy": (">=", 0.85),
    "recovery_mape": ("<=", 0.30),
}


#: How the operator's busy-time spread is fitted (``--busy-noise``).
BUSY_NOISE_FITS = ("changes", "decisions", "off")


def _screened_runs(data: Path) -> pd.DataFrame:
    """The folder's profiling runs that pass the physical checks; a line on stderr per dropped row."""
    screened = screen_observations(pd.read_csv(data / "profiling_runs.csv"), str(data / "profiling_runs.csv"))
    for line in (*screened.dropped, *screened.notes):
        print(line, file=sys.stderr)
    return screened.rows


def _fmt(v: object) -> str:
    if isinstance(v, (float, np.floating)):
        return "n/a" if not np.isfinite(v) else f"{v:.3f}"
    return str(v)


def _md(df: pd.DataFrame) -> str:
    head = "| " + " | ".join(df.columns) + " |\n|" + "---|" * len(df.columns) + "\n"
    return head + "".join("| " + " | ".join(_fmt(v) for v in row) + " |\n" for row in df.itertuples(index=False))


def run(
    data: Path,
    out: Path | None,
    *,
    hours: float | None,
    rows: int | None,
    seeds: Sequence[int],
    workers: int,
    command: str,
    max_nfev: int = 60,
    policies: Sequence[str] = tuple(METHODS),
    skip_loro: bool = False,
    calibrate: bool = True,
    operator: str = DEFAULT_OPERATOR,
    busy_noise: str = "changes",
    redeploy_fit: str = "backlog",
    source_partitions: int | None = 1,
    carry_profiles: bool = False,
    redeploy_methods: str = REDEPLOY_METHODS,
) -> dict:
    """Every figure of the benchmark as a dict (and the Markdown file when ``out`` is given).

    The replay runs once per seed (failures and noise); the comparison uses the mean over seeds and
    the per-seed range is reported beside it. ``policies`` replays a subset (static always);
    ``skip_loro`` leaves out the leave-one-run-out scores; ``calibrate=False`` leaves out the CPU
    calibration and the published targets (the mechanism fit alone, the baselines at their defaults).
    ``operator``: the operator autoscaler's published version (:data:`~flinktune.policies.autoscaler.VERSIONS`;
    default the one Demeter's evaluation ran, ``demeter-1.6``). ``busy_noise``: the spread of the operator's
    busy-time reading (:data:`BUSY_NOISE_FITS`; ``changes``, the default, replays the operator once per spread of
    :data:`flinktune.replay.decision_noise.DEFAULT_SIGMAS` on the first seed first). ``carry_profiles``: Demeter as a chain
    of runs sharing one profile database (module docstring); the result's ``per_rank`` compares each rank.
    """
    t0 = time.perf_counter()
    runs_csv = _screened_runs(data)
    if rows:
        runs_csv = runs_csv.groupby("run", group_keys=False).head(int(np.ceil(rows / runs_csv["run"].nunique()))).head(rows)
    base = ClusterProfile.default("ysb")
    folds = pd.DataFrame(columns=["run"]) if skip_loro else cross_validate(runs_csv, base, group_by="run", max_nfev=max_nfev)
    cv_mean = folds.drop(columns=["run"]).astype(float).mean()
    space = space_from_runs(runs_csv)
    cal = calibrated_twin(
        data,
        runs_csv,
        base,
        space,
        max_nfev=max_nfev,
        calibrate=calibrate,
        operator=operator,
        busy_noise=busy_noise == "decisions",
        redeploy_fit=redeploy_fit,
        source_partitions=source_partitions,
        redeploy_methods=redeploy_methods,
    )
    twin, profile, options = cal.twin, cal.profile, cal.options
    restart_note, downtime_note, redeploy_note, cpu_note, busy_note = (
        cal.notes[k] for k in ("restart", "downtime", "redeploy", "cpu", "busy")
    )
    policies = ["static", *[p for p in policies if p != "static"]]
    measured = measured_table(data)
    # Demeter's share of minutes at the default, per measured run and over them
    traj = measured_trajectory(data) if CARRIED in policies and (data / "measured_60s").is_dir() else None
    shares = dict(zip(traj["run"].astype(int), traj["at_default"])) if traj is not None else None
    measured_ranks = measured_runs(data, METHODS[CARRIED], shares) if carry_profiles and CARRIED in policies else None
    if traj is not None:
        measured.loc[CARRIED, "at_default"] = float(traj["at_default"].mean()) if not traj.empty else np.nan
    static_row = pd.read_csv(data / "summary_by_method.csv").set_index("method").loc["baseline"]
    mx = space.maximum
    static_note = (
        f"space maximum {mx.describe()} vs measured static {static_row['tm_mean']:g} TaskManagers x "
        f"({static_row['cpu_cores_mean'] / static_row['tm_mean']:g} CPU, {static_row['mem_gib_mean'] / static_row['tm_mean']:.2f} GiB)"
    )
    trace, forecaster = replay_trace(data, hours)
    failures, failures_from = failure_spec(data)
    # The latency goal of every policy and the guard: Demeter's published boundary, 2.14 x the lowest
    # profiled latency (docs/baselines.md, demeter), from this folder's runs (a fixed 1 s would call every
    # configuration of a job whose idle latency is above 1 s "bad").
    latency_target_ms = BAD_LATENCY_FACTOR * float(runs_csv["latency_ms"].min())
    per_seed, per_rank = [], []
    seed_settings = {
        seed: ReplaySettings(
            workload="ads", failures=failures, seed=seed, forecaster=forecaster, latency_target_ms=latency_target_ms
        )
        for seed in seeds
    }
    if busy_noise == "changes" and calibrate and "autoscaler" in policies:
        cal = fit_operator_noise(data, cal, space, trace, seed_settings[seeds[0]], workers=workers)
        options, busy_note = cal.options, cal.notes["busy"]
    # The operator's noisy readings draw from the replay's seed (a no-op for a policy without noise).
    seed_options = {seed: {**options, "autoscaler": {**options.get("autoscaler", {}), "noise_seed": seed}} for seed in seeds}
    once = [p for p in policies if measured_ranks is None or p != CARRIED]
    # Every seed's replays on one pool: Demeter's seeds run side by side (a pool per seed left a
    # worker idle while Demeter, the slowest by far, replayed alone).
    print(f"replaying {', '.join(once)} on {len(seeds)} seeds ({workers} workers)", file=sys.stderr, flush=True)
    all_replays = run_replays(
        trace,
        {(seed, p): (p, seed_settings[seed], seed_options[seed].get(p)) for seed in seeds for p in once},
        workers=workers,
        progress=sys.stderr,
        space=space,
        profile=profile,
    )
    for seed in seeds:
        settings, seeded = seed_settings[seed], seed_options[seed]
        replays = {p: all_replays[(seed, p)] for p in once}
        if measured_ranks is None:
            tables = [with_default(replayed_table(replays, settings.recovery_limit_s), replays, mx)]
        else:  # Demeter's chain: one table per rank, the others' rows the same in each
            chain = replay_chain(
                CARRIED, trace, profile, space, settings, len(measured_ranks), policy_options=seeded.get(CARRIED)
            )
            tables = []
            for rank, link in zip(measured_ranks.index, chain):
                both = {**replays, CARRIED: link}
                tab = with_default(replayed_table(both, settings.recovery_limit_s), both, mx)
                tables.append(tab.loc[policies])
                per_rank.append(
                    {
                        "seed": seed,
                        "rank": rank,
                        "profiles_at_start": link.prior_profiles,
                        "profiling_runs": link.summary["profiling_runs"],
                        **tab.loc[CARRIED].to_dict(),
                    }
                )
        per_seed.append(pd.concat(tables).groupby(level=0).mean().loc[policies])
    stacked = pd.concat(per_seed, keys=list(seeds), names=["seed", "policy"])
    replayed = stacked.groupby(level="policy").mean().loc[policies]
    table = compare(replayed, measured)
    lo, hi = stacked.groupby(level="policy").min(), stacked.groupby(level="policy").max()
    table["seed range"] = [
        f"{lo.loc[p, f]:.3f}-{hi.loc[p, f]:.3f}" if p in lo.index and f in lo.columns else ""
        for p, f in zip(table["policy"], table["figure"])
    ]
    per_rank_table = rank_table(pd.DataFrame(per_rank), measured_ranks) if measured_ranks is not None else None
    result = {
        "folds": folds,
        "cv_mean": cv_mean,
        "params": twin.params,
        "replayed": replayed,
        "measured": measured,
        "comparison": table,
        "seeds": list(seeds),
        "failures": failures,
        "failures_from": failures_from,
        "static_note": static_note,
        "cpu_note": cpu_note,
        "restart_note": restart_note,
        "busy_note": busy_note,
        "downtime_note": downtime_note,
        "redeploy_note": redeploy_note,
        "targets": options,
        "operator": operator,
        "cpu_per_busy": profile.cpu_per_busy,
        "hours": len(trace) / 3600.0,
        "forecaster": forecaster,
        "latency_target_ms": latency_target_ms,
        "rows": len(runs_csv),
        "wall_s": time.perf_counter() - t0,
        "checks_note": _checks_note(runs_csv["recovery_s"].to_numpy(dtype=float)),
        "changes_note": measured.attrs.get("changes_note", "all published"),
        "carry_profiles": measured_ranks is not None,
        "per_rank": per_rank_table,
        "per_rank_seeds": pd.DataFrame(per_rank),
    }
    if out:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(render(result, data, command))
    return result


def _checks_note(recoveries: np.ndarray) -> str:
    """How many of the folder's recorded recoveries lie on the replayed Demeter profiler's check times."""
    c = DEMETER_CHECKS
    hit, of = on_schedule(recoveries, c)
    return (
        f"the replayed Demeter reads its profiling runs' recoveries at checks {c.first_check_s} s after the fault, then every "
        f"{c.check_every_s} s (flinktune.twin.recovery_checks); {hit} of the folder's {of} recorded recoveries below the "
        f"{c.cap_s:g} s cap lie within 6 s of a check"
    )


def _cv_rows(cv: pd.Series) -> pd.DataFrame:
    return pd.DataFrame(
        [
            (k, cv[k], cv.get(f"mech_{k}", np.nan), f"{op} {b:g}", (cv[k] <= b) if op == "<=" else (cv[k] >= b))
            for k, (op, b) in CV_TARGETS.items()
        ],
        columns=["score", "grey-box", "mechanism only", "target", "met"],
    )


def render_loro(folds: pd.DataFrame, command: str, wall_s: float) -> str:
    """The leave-one-run-out tables alone (``--loro-only``)."""
    return (
        f"Command: `{command}` (wall time {wall_s:.0f} s)\n\n"
        + _md(_cv_rows(folds.drop(columns=["run"]).mean()))
        + "\nPer held-out run:\n\n"
        + _md(folds.round(4))
    )


def render(r: dict, data: Path, command: str) -> str:
    cv_rows = _cv_rows(r["cv_mean"]) if not r["folds"].empty else None
    return (
        f"# Twin fidelity: {data.name}\n\nCommand: `{command}`\n\n"
        f"Profiling runs: {r['rows']}; trace: {r['hours']:.1f} h; forecaster of the model policies: {r['forecaster']}; latency goal {r['latency_target_ms']:.0f} ms (2.14 x the lowest profiled latency, Demeter's boundary); failures: `{r['failures']}` ({r['failures_from']}); "
        f"wall time {r['wall_s']:.0f} s.\n\n"
        + (
            "## Profiling runs, leave-one-run-out: not run (--skip-loro)\n\n"
            if r["folds"].empty
            else "## Profiling runs, leave-one-run-out (mean over the held-out runs)\n\n"
            + _md(cv_rows)
            + "\nPer held-out run:\n\n"
            + _md(r["folds"].round(4))
        )
        + "\nMechanism fitted on all runs (the profile the replays use): "
        + ", ".join(f"`{k}`={v:.4g}" for k, v in r["params"].items())
        + "\n\n"
        f"## Replayed methods against measured (relative to static; recoveries and reconfigurations per run; twin: mean over seeds {r['seeds']})\n\n"
        f"Static: {r['static_note']}.\n\n"
        f"Operator autoscaler: version `{r['operator']}` ({OPERATOR_NOTES[r['operator']]}); busy time it reads: {r['busy_note']}.\n\n"
        f"CPU: {r['cpu_note']}. Restart cost: {r['restart_note']}. Redeploy downtime: {r['downtime_note']}. Redeploy warm-up: {r['redeploy_note']}. Policy options (targets from the measured methods' names; the operator's version and busy time): {r['targets'] or 'none'}. "
        "Latency p50 / p95 / p99: the quantiles of the p95 latency over the seconds the job runs, as the measured runs' "
        "metric reports it (the twin's every-second p95, down seconds included, in `p95_every_second`). "
        "Slow recoveries: detector-like measure (20 s wait, then 15 normal points of 5 s; the twin's own lag measure in `slow_recoveries_twin_measure`). "
        f"Profiling recoveries: {r['checks_note']}. Reconfigurations where the summary has none: {r['changes_note']}.\n\n"
        + _md(r["comparison"])
        + "\n"
        + (
            ""
            if r.get("per_rank") is None
            else "\n## Demeter with a carried profile database, per rank (replay k of each seed's chain against measured run k)\n\n"
            "Each seed's chain: run 1 from the start-up design, each later run with the previous run's profiles "
            "(not charged, no start-up design); the table above compares the chain's mean with the measured mean.\n\n"
            + _md(r["per_rank"])
            + "\n"
        )
    )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", type=Path, required=True, help="A folder in the demeter-ads format.")
    ap.add_argument("--out", type=Path, default=None, help="Markdown file for the figures.")
    ap.add_argument("--hours", type=float, default=None, help="Replay only the first hours of the trace (quick check).")
    ap.add_argument(
        "--rows", type=int, default=None, help="Use only this many profiling runs, spread over the runs (quick check)."
    )
    ap.add_argument("--seeds", default="7", help="Comma-separated replay seeds (the comparison uses their mean).")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument(
        "--max-nfev", type=int, default=60, help="Model evaluations per mechanism-fit stage (lower for a quick check)."
    )
    ap.add_argument(
        "--loro-only", action="store_true", help="Only the leave-one-run-out scores (minutes, not the replays' ~20 min)."
    )
    ap.add_argument("--skip-loro", action="store_true", help="Only the replays (no leave-one-run-out scores).")
    ap.add_argument(
        "--policies",
        default=",".join(METHODS),
        help="Comma-separated replayed methods (static always; a subset skips the rankings).",
    )
    ap.add_argument(
        "--no-calibrate",
        action="store_true",
        help="No CPU calibration on the measured static run and no published targets (the mechanism fit alone, the baselines at their defaults).",
    )
    ap.add_argument(
        "--operator",
        choices=list(VERSIONS),
        default=DEFAULT_OPERATOR,
        help=f"The operator autoscaler's published version (default {DEFAULT_OPERATOR}, the one Demeter's evaluation ran).",
    )
    ap.add_argument(
        "--busy-noise",
        choices=BUSY_NOISE_FITS,
        default="changes",
        help="The spread of the busy time the operator reads: changes (default; fitted on how often the measured "
        "operator changed the job, flinktune.replay.decision_noise), decisions (the most likely on its measured "
        "decisions, an upper bound), off (as the twin reports it, scaled).",
    )
    ap.add_argument(
        "--redeploy-fit",
        choices=list(REDEPLOY_FITS),
        default="backlog",
        help="How the redeploy's downtime and warm-up are fitted on the operator runs: backlog (default; both on the "
        "backlog after their scale-downs), downtime (the downtime on it, the warm-up on their latency), latency "
        "(the warm-up alone, on their latency); flinktune.calibration.folder.",
    )
    ap.add_argument(
        "--redeploy-methods",
        default=REDEPLOY_METHODS,
        help="Whose measured scale-downs the redeploy's downtime and warm-up are fitted on: a method of the folder's "
        f"measured_60s file names, or several joined by commas, pooled. Default {REDEPLOY_METHODS} (pooled: the "
        "operator's alone leaves Demeter's p95 far over the measured).",
    )
    ap.add_argument(
        "--source-partitions",
        type=int,
        default=1,
        help="The busy-time fit reads the measured lag x this (the operator's lag is the sum over the source topic's "
        "partitions, the measured one about one partition's; Demeter's topic had 24). Default 1, the lag as measured: "
        "x 24 makes the replay worse.",
    )
    ap.add_argument(
        "--carry-profiles",
        action="store_true",
        help="Replay Demeter as a chain of as many runs as the folder has measured Demeter runs, each carrying the "
        "previous run's profiles; compare replay k with measured run k and the chain mean with the measured mean.",
    )
    args = ap.parse_args(argv)
    if not (args.data / "profiling_runs.csv").exists():
        ap.error(f"--data {args.data}: no profiling_runs.csv (not a folder in the demeter-ads format)")
    command = "python -m benchmarks.fidelity.twin_fidelity " + " ".join(argv if argv is not None else sys.argv[1:])
    if args.loro_only:
        t0 = time.perf_counter()
        folds = cross_validate(_screened_runs(args.data), ClusterProfile.default("ysb"), group_by="run", max_nfev=args.max_nfev)
        print(render_loro(folds, command, time.perf_counter() - t0))
        return 0
    r = run(
        args.data,
        args.out,
        hours=args.hours,
        rows=args.rows,
        seeds=[int(x) for x in args.seeds.split(",") if x.strip()],
        workers=args.workers,
        command=command,
        max_nfev=args.max_nfev,
        policies=[p.strip() for p in args.policies.split(",") if p.strip()],
        skip_loro=args.skip_loro,
        calibrate=not args.no_calibrate,
        operator=args.operator,
        busy_noise=args.busy_noise,
        redeploy_fit=args.redeploy_fit,
        source_partitions=args.source_partitions,
        carry_profiles=args.carry_profiles,
        redeploy_methods=args.redeploy_methods,
    )
    print(render(r, args.data, command))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
