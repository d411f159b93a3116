"""The replay benchmark over many seeds, against the replay bound: mean and worst seed per policy.

``python -m benchmarks.policy.replay_seeds --trace FILE|ysb|tsw --profile P --seeds 1-5 --failures every:45m
[--policies all] [--hours 18] [--latency-target-ms 1000] [--out docs/results/replay-seeds-<trace>.md]``

Use it when one seed's replay table (``flinktune replay``, ``benchmarks/policy/replay.py``) is not enough
to say a policy wins: every policy is replayed on each seed exactly as ``flinktune replay`` does
(:func:`flinktune.replay.runner.run_replay`; the failure times and the twin's noise move with the
seed, and so does the trace of a built-in generator), and the replay bound
(:func:`benchmarks.policy.replay_bound.bound_for_rates`) is computed on the same trace and profile. The
Markdown file holds, per policy, the mean and the worst seed of CPU, memory, priced cost and p95
(relative to static), CPU as a multiple of the bound, recoveries over the limit and
reconfigurations, and the targets with met/missed; a JSON file beside it holds every seed's
rows. Both are rewritten after every seed, so a stopped run keeps the seeds it finished.
Bad input (unknown profile or policy, seeds like ``5-1``, a missing trace file) is one line on
stderr and exit code 2 (:func:`flinktune.entry.run_main`).
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
import time
from collections.abc import Sequence
from functools import partial
from pathlib import Path
from typing import Any

import pandas as pd

from benchmarks.policy.replay_bound import bound_for_rates, bound_with_changes
from flinktune.entry import OneLineParser, run_main
from flinktune.lake.atomic import atomic_write
from flinktune.pricing import PriceList, load_prices
from flinktune.replay.harness import ReplaySettings
from flinktune.replay.models import FORECASTERS
from flinktune.replay.output import priced_relative_table
from flinktune.replay.policy_options import check_policy_options, parse_policy_options
from flinktune.replay.runner import load_with_history, resolve_policies, resolve_profile, run_replay
from flinktune.twin.failures import parse_failures
from flinktune.twin.workload import WORKLOADS

ROOT = Path(__file__).resolve().parents[2]

__all__ = ["COLUMNS", "main", "parse_seeds", "run", "seed_rows", "targets"]

PROG = "benchmarks.policy.replay_seeds"

#: Per-seed figures of a policy: (key, header, format). All are "lower is better", so the worst seed is the maximum.
COLUMNS: tuple[tuple[str, str, str], ...] = (
    ("cpu", "CPU", "{:.3f}"),
    ("cpu_x_bound", "CPU / bound", "{:.2f}"),
    ("memory", "memory", "{:.3f}"),
    ("priced_cost", "priced cost", "{:.3f}"),
    ("p95", "p95", "{:.2f}"),
    ("recoveries_over_limit", "recoveries > limit", "{:.0f}"),
    ("recovery_max_s", "worst recovery s", "{:.0f}"),
    ("reconfigurations", "reconfigurations", "{:.0f}"),
)

#: The measured real Demeter on ADS, relative to static (means of 3 runs, ../shared/data/demeter-ads/README.md).
REAL_DEMETER = {"cpu": 0.82, "memory": 0.60}


def parse_seeds(text: str) -> list[int]:
    """``"1-5"``, ``"7"`` or ``"1-3,9"`` as a list of distinct seeds, in order."""
    seeds: list[int] = []
    for part in str(text).split(","):
        part = part.strip()
        try:
            if "-" in part.lstrip("-"):
                lo_s, hi_s = part.split("-", 1)
                lo, hi = int(lo_s), int(hi_s)
                if lo > hi:
                    raise ValueError(f"--seeds {text!r}: the range {part!r} runs backwards; write {hi}-{lo}")
                seeds.extend(range(lo, hi + 1))
            else:
                seeds.append(int(part))
        except ValueError as exc:
            if "backwards" in str(exc):
                raise
            raise ValueError(f"--seeds {text!r}: expected seeds like 1-5, 7 or 1-3,9") from None
    if not seeds:
        raise ValueError(f"--seeds {text!r}: no seed given; expected e.g. 1-5")
    return list(dict.fromkeys(seeds))


def seed_rows(table: pd.DataFrame, bound_cpu: float) -> dict[str, dict[str, float]]:
    """Per policy, the :data:`COLUMNS` figures of one seed from its priced relative table."""
    rows: dict[str, dict[str, float]] = {}
    for name, r in table.iterrows():
        rows[str(name)] = {
            "cpu": float(r["cpu_core_hours"]),
            "cpu_x_bound": float(r["cpu_core_hours"]) / bound_cpu if bound_cpu > 0 else float("nan"),
            "memory": float(r["memory_gib_hours"]),
            "priced_cost": float(r["priced_cost"]),
            "p95": float(r["latency_p95_ms"]),
            "recoveries_over_limit": float(r["recoveries_over_limit"]),
            "recovery_max_s": float(r["recovery_max_s"]),
            "reconfigurations": float(r["reconfigurations"]),
        }
    return rows


def _aggregate(per_seed: dict[int, dict[str, dict[str, float]]], how: str) -> pd.DataFrame:
    frames = {seed: pd.DataFrame.from_dict(rows, orient="index") for seed, rows in per_seed.items()}
    stacked = pd.concat(frames, names=["seed", "policy"])
    grouped = stacked.groupby(level="policy", sort=False)
    out = grouped.mean() if how == "mean" else grouped.max()
    return out[[c for c, _, _ in COLUMNS]]


def _table(df: pd.DataFrame) -> str:
    lines = ["| policy | " + " | ".join(h for _, h, _ in COLUMNS) + " |", "|---" * (len(COLUMNS) + 1) + "|"]
    for name, row in df.iterrows():
        lines.append(f"| {name} | " + " | ".join(fmt.format(row[c]) for c, _, fmt in COLUMNS) + " |")
    return "\n".join(lines)


def targets(
    per_seed: dict[int, dict[str, dict[str, float]]],
    *,
    real_workload: bool,
    hours: float,
    demeter_priced: float | None,
    policy: str = "flinktune",
) -> list[tuple[str, str, bool]]:
    """The targets for ``policy``: (target, figure, met). ``real_workload``: the ADS
    targets, else the synthetic traces' ones. ``demeter_priced``: the measured real Demeter's
    priced cost relative to static (ADS only)."""
    if not per_seed or any(policy not in rows for rows in per_seed.values()):
        return []
    mine = pd.DataFrame({s: rows[policy] for s, rows in per_seed.items()}).T
    mean, worst = mine.mean(), mine.max()
    out: list[tuple[str, str, bool]] = []
    if real_workload:
        reconf_cap = 12.0 * hours / 18.0
        out += [
            ("CPU <= 1.20x the bound (mean)", f"{mean['cpu_x_bound']:.2f}x", bool(mean["cpu_x_bound"] <= 1.20)),
            ("memory <= 0.40 of static (mean)", f"{mean['memory']:.3f}", bool(mean["memory"] <= 0.40)),
            ("p95 <= 1.5x static (mean)", f"{mean['p95']:.2f}x", bool(mean["p95"] <= 1.5)),
            ("p95 <= 1.7x static (worst seed)", f"{worst['p95']:.2f}x", bool(worst["p95"] <= 1.7)),
            (
                "no recovery over the limit (every seed)",
                f"{worst['recoveries_over_limit']:.0f}",
                bool(worst["recoveries_over_limit"] == 0),
            ),
            (
                f"<= {reconf_cap:g} reconfigurations per {hours:g} h (every seed; 12 per 18 h)",
                f"{worst['reconfigurations']:.0f} (worst seed)",
                bool(worst["reconfigurations"] <= reconf_cap),
            ),
        ]
    else:
        out += [
            ("CPU <= 1.30x the bound (mean)", f"{mean['cpu_x_bound']:.2f}x", bool(mean["cpu_x_bound"] <= 1.30)),
            ("p95 <= 1.5x static (mean)", f"{mean['p95']:.2f}x", bool(mean["p95"] <= 1.5)),
            (
                "no recovery over the limit (every seed)",
                f"{worst['recoveries_over_limit']:.0f}",
                bool(worst["recoveries_over_limit"] == 0),
            ),
        ]
    # Lowest priced cost among the policies that keep p95 <= 1.5x and recover in time, on every seed
    # (the oracle knows the future and the twin's ground truth: it is a reference, not a competitor).
    lost: list[str] = []
    for seed, rows in per_seed.items():
        ok = {n: r for n, r in rows.items() if n != "oracle" and r["p95"] <= 1.5 and r["recoveries_over_limit"] == 0}
        cheapest = min(ok, key=lambda n: ok[n]["priced_cost"]) if ok else None
        if cheapest != policy:
            lost.append(f"seed {seed}: {cheapest or 'none eligible'}")
    out.append(
        (
            "lowest priced cost among policies with p95 <= 1.5x and no slow recovery (every seed)",
            "; ".join(lost) if lost else "lowest on every seed",
            not lost,
        )
    )
    if real_workload and demeter_priced is not None:
        cap = 0.75 * demeter_priced
        out.append(
            (
                f"priced cost <= 0.75x the real Demeter's ({demeter_priced:.3f} of static: CPU 0.82, memory 0.60) = {cap:.3f} (mean)",
                f"{mean['priced_cost']:.3f}",
                bool(mean["priced_cost"] <= cap),
            )
        )
    return out


def _render(r: dict[str, Any]) -> str:
    per_seed: dict[int, dict[str, dict[str, float]]] = r["per_seed"]
    done = ", ".join(str(s) for s in per_seed)
    lines = [
        f"# Replay over seeds: {r['trace_name']} on the {r['profile']} profile",
        "",
        f"Command: `{r['command']}`",
        "",
        f"Seeds done: {done} of {r['seeds_text']}"
        + ("" if len(per_seed) == len(r["seeds"]) else " (not all seeds finished: the figures are over the seeds done)")
        + f". {r['hours']:g} h of trace replayed"
        + (
            f" (after its first {r['history_hours']:g} h, which the forecasters are fitted on and forecast from; "
            "the replay, static and the bound all cover the replayed span only)"
            if r.get("history_hours")
            else ""
        )
        + f", failures `{r['failures']}`, latency goal {r['latency_target_ms']:g} ms, "
        f"recovery limit {r['recovery_limit_s']:g} s, forecaster {r['forecaster']}"
        + "".join(f", {n} with {', '.join(f'{k}={v:g}' for k, v in o.items())}" for n, o in r.get("policy_options", {}).items())
        + ". Wall time per seed (s): "
        + ", ".join(f"{s}: {w:.0f}" for s, w in r["wall_s"].items())
        + ".",
        "",
        "CPU, memory, priced cost and p95 are relative to static (the space's maximum, reserved all the time) on the "
        f"same seed; CPU and memory include profiling. Priced cost: {r['prices']}. CPU / bound: CPU over the replay "
        "bound (`benchmarks/policy/replay_bound.py`: per-second perfect sizing that keeps recovery within the limit; "
        "ground truth no policy has) on the same trace, profile and seed. Recoveries, worst recovery and "
        "reconfigurations are absolute counts / seconds per run.",
        "",
        "Replay bound (CPU relative to static) per seed: "
        + ", ".join(
            f"{s}: {b['per_second']:.3f} (best single shape {b['single_shape']:.3f}"
            + (f"; with at most {b['cap']} changes {b['capped']:.3f}" if "capped" in b else "")
            + ")"
            for s, b in r["bounds"].items()
        )
        + ".",
        "",
        "## Mean over seeds",
        "",
        _table(_aggregate(per_seed, "mean")),
        "",
        "## Worst seed (the highest value of each column over the seeds)",
        "",
        _table(_aggregate(per_seed, "max")),
        "",
    ]
    checks = r["targets"]
    if checks:
        lines += [
            "## Targets for flinktune"
            + (" (ADS real trace, calibrated profile)" if r["real_workload"] else " (synthetic trace, built-in profile)"),
            "",
            "| target | figure | met |",
            "|---|---|---|",
            *[f"| {t} | {fig} | {'met' if ok else 'missed'} |" for t, fig, ok in checks],
            "",
        ]
    lines += ["## Per seed", ""]
    for seed, rows in per_seed.items():
        lines += [f"### Seed {seed}", "", _table(pd.DataFrame.from_dict(rows, orient="index")), ""]
    return "\n".join(lines)


def run(
    trace: str,
    *,
    profile: str | None,
    seeds_text: str,
    failures: str = "every:45m",
    policies: str = "all",
    hours: float = 18.0,
    latency_target_ms: float = 1000.0,
    recovery_limit_s: float = 180.0,
    forecaster: str = "peak",
    workers: int = 2,
    out: str | Path | None = None,
    command: str = "",
    prices: PriceList | None = None,
    progress: bool = True,
    history_hours: float = 0.0,
    policy_options: dict[str, dict[str, float]] | None = None,
) -> dict[str, Any]:
    """Replay ``policies`` on every seed of ``seeds_text`` and write the Markdown (and JSON) file; returns its content as a dict.

    ``policy_options`` (``{policy: {constructor argument: value}}``, :func:`parse_policy_options`) set a
    baseline to its published settings, e.g. reactive mode's CPU target.
    """
    # Every input is checked before the first replay: a bad one costs nothing.
    if not hours > 0:
        raise ValueError(f"--hours must be > 0, got {hours}")
    seeds = parse_seeds(seeds_text)
    parse_failures(failures)
    names = resolve_policies(policies)
    policy_options = policy_options or {}
    check_policy_options(policy_options, names)
    history, series, workload = load_with_history(trace, hours, seeds[0], history_hours)
    prof = resolve_profile(profile, workload)
    prices = prices or load_prices()
    trace_name = Path(trace).stem if trace not in WORKLOADS else trace
    out_path = Path(out) if out is not None else ROOT / "docs" / "results" / f"replay-seeds-{trace_name}.md"
    out_path.parent.mkdir(parents=True, exist_ok=True)
    r: dict[str, Any] = {
        "command": command,
        "trace": trace,
        "trace_name": trace_name,
        "profile": profile or workload,
        "real_workload": str(profile) == "ads",
        "seeds": seeds,
        "seeds_text": seeds_text,
        "failures": failures,
        "policies": names,
        "hours": hours,
        "history_hours": history_hours,
        "latency_target_ms": latency_target_ms,
        "recovery_limit_s": recovery_limit_s,
        "forecaster": forecaster,
        "policy_options": policy_options,
        "prices": prices.describe(),
        "bounds": {},
        "per_seed": {},
        "wall_s": {},
        "targets": [],
    }
    file_bound: dict[str, float] | None = None
    # What every seed replays with; each seed brings its own trace, history and generator seed.
    seed_settings = partial(
        ReplaySettings,
        failures=failures,
        forecaster=forecaster,
        latency_target_ms=latency_target_ms,
        recovery_limit_s=recovery_limit_s,
    )
    for seed in seeds:
        t0 = time.perf_counter()
        if seed != seeds[0]:
            history, series, workload = load_with_history(trace, hours, seed, history_hours)
        # A trace file is the same on every seed: its bound once; a generator's trace moves with the seed.
        if trace in WORKLOADS or file_bound is None:
            b = bound_for_rates(series.to_numpy(), prof, recovery_limit_s, label=f"{trace_name} seed {seed}")
            # The same bound held to the targets' reconfiguration cap (12 per 18 h): what any capped policy can reach.
            cap = int(12 * hours / 18)
            b["capped"] = bound_with_changes(series.to_numpy(), prof, recovery_limit_s, (cap,))[cap]
            b["cap"] = cap
            file_bound = b if trace not in WORKLOADS else None
        else:
            b = file_bound
        settings = seed_settings(workload=workload, seed=seed, history=history)
        runs = run_replay(
            series, workload, names, settings, workers=workers, profile=prof, progress=progress, policy_options=policy_options
        )
        summaries = {n: run.summary for n, run in runs.items()}
        table, _ = priced_relative_table(summaries, prices)
        r["bounds"][seed] = b
        r["per_seed"][seed] = seed_rows(table, b["per_second"])
        r["wall_s"][seed] = time.perf_counter() - t0
        static = summaries["static"]
        demeter_priced = prices.cost(
            REAL_DEMETER["cpu"] * static["cpu_core_hours"], REAL_DEMETER["memory"] * static["memory_gib_hours"]
        ) / prices.cost(static["cpu_core_hours"], static["memory_gib_hours"])
        r["targets"] = targets(r["per_seed"], real_workload=r["real_workload"], hours=hours, demeter_priced=demeter_priced)
        atomic_write(out_path, _render(r).encode())
        atomic_write(out_path.with_suffix(".json"), json.dumps(r, indent=1, default=str, allow_nan=True).encode())
        print(f"seed {seed}: {r['wall_s'][seed]:.0f} s -> {out_path}", file=sys.stderr, flush=True)
    r["out"] = str(out_path)
    return r


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    args = list(sys.argv[1:] if argv is None else argv)
    p = OneLineParser(prog=PROG, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--trace", required=True, help="ysb, tsw (seeded generators) or a CSV trace file (timestamp,value)")
    p.add_argument(
        "--profile", default=None, help="ysb, tsw, ads (calibrated) or a profile YAML; default the trace's built-in one"
    )
    p.add_argument("--seeds", default="1-5", help="seeds, e.g. 1-5, 7 or 1-3,9")
    p.add_argument("--failures", default="every:45m")
    p.add_argument("--policies", default="all", help="comma-separated policy names or 'all' (static is always included)")
    p.add_argument("--hours", type=float, default=18.0, help="hours replayed (after --history-hours of a trace file)")
    p.add_argument(
        "--history-hours",
        type=float,
        default=0.0,
        help="trace files: the first hours fit the forecasters (not replayed; the bound covers the replayed span only)",
    )
    p.add_argument("--latency-target-ms", type=float, default=1000.0)
    p.add_argument("--recovery-limit-s", type=float, default=180.0)
    p.add_argument("--forecaster", default="peak", choices=list(FORECASTERS))
    p.add_argument("--workers", type=int, default=2)
    p.add_argument(
        "--policy-option",
        action="append",
        default=[],
        metavar="POLICY.ARGUMENT=NUMBER",
        help="a baseline's published setting, repeatable, e.g. reactive.target_utilization=0.35 (reactive mode's CPU target on ADS)",
    )
    p.add_argument("--out", default=None, help="Markdown file (default docs/results/replay-seeds-<trace>.md); a .json beside it")
    a = p.parse_args(args)
    command = "python -m benchmarks.policy.replay_seeds " + shlex.join(x for x in args if x != "--debug")
    return run(
        a.trace,
        profile=a.profile,
        seeds_text=a.seeds,
        failures=a.failures,
        policies=a.policies,
        hours=a.hours,
        latency_target_ms=a.latency_target_ms,
        recovery_limit_s=a.recovery_limit_s,
        forecaster=a.forecaster,
        workers=a.workers,
        out=a.out,
        command=command,
        history_hours=a.history_hours,
        policy_options=parse_policy_options(a.policy_option),
    )


if __name__ == "__main__":
    sys.exit(run_main(PROG, main))
