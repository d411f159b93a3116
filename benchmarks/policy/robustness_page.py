"""The robustness benchmark's page: each scenario's table relative to static, the SLO verdicts, the summary.

Use it through ``benchmarks/policy/robustness.py``, which replays the matrix and writes the page and its
JSON after every scenario; this module only turns the stored results into figures and Markdown, so a
page can be re-rendered from a JSON file without replaying anything.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from benchmarks.policy.fixed_hindsight import HINDSIGHT
from benchmarks.policy.scenario_matrix import Scenario
from flinktune.lake.atomic import atomic_write
from flinktune.pricing import PriceList
from flinktune.replay.output import priced_relative_table

__all__ = ["COLUMNS", "MINUTES_ALLOWANCE", "NOT_COMPETING", "P95_LIMIT", "render", "scenario_table", "summary", "write"]

#: The SLO's p95 limit relative to static, and the minutes over target allowed beyond static's (share of the replayed minutes).
P95_LIMIT = 1.5
MINUTES_ALLOWANCE = 0.01
#: References that are not competitors: they know the future (and the oracle the twin's ground truth).
NOT_COMPETING = frozenset({"oracle", HINDSIGHT})

#: Per-policy figures of a scenario: (key, header, format).
COLUMNS: tuple[tuple[str, str, str], ...] = (
    ("cpu", "CPU", "{:.3f}"),
    ("memory", "memory", "{:.3f}"),
    ("priced_cost", "priced cost", "{:.3f}"),
    ("p95", "p95", "{:.2f}"),
    ("minutes_over", "min > target", "{:.1f}"),
    ("recoveries_over_limit", "recoveries > limit", "{:.1f}"),
    ("reconfigurations", "changes", "{:.1f}"),
    ("cpu_x_bound", "CPU / bound", "{:.2f}"),
    ("cpu_x_capped", "CPU / capped bound", "{:.2f}"),
)


def _seed_rows(entry: dict[str, Any], prices: PriceList, minutes: int) -> dict[str, dict[str, float]]:
    """Per policy, the :data:`COLUMNS` figures of one seed (relative to its static), plus the SLO checks."""
    pols = entry["policies"]
    if "static" not in pols:
        return {}
    table, _ = priced_relative_table({n: r["summary"] for n, r in pols.items()}, prices)
    bound = entry.get("bound", {})
    static_over = float(pols["static"]["minutes_over"])
    rows: dict[str, dict[str, float]] = {}
    for name, r in table.iterrows():
        n = str(name)
        cpu = float(r["cpu_core_hours"])
        k = str(int(r["reconfigurations"]))
        capped = bound.get("capped", {}).get(k, float("nan"))
        per_second = bound.get("per_second", float("nan"))
        row = {
            "cpu": cpu,
            "memory": float(r["memory_gib_hours"]),
            "priced_cost": float(r["priced_cost"]),
            "p95": float(r["latency_p95_ms"]),
            "minutes_over": float(pols[n]["minutes_over"]),
            "recoveries_over_limit": float(r["recoveries_over_limit"]),
            "reconfigurations": float(r["reconfigurations"]),
            "cpu_x_bound": cpu / per_second if per_second and per_second == per_second else float("nan"),
            "cpu_x_capped": cpu / capped if capped and capped == capped else float("nan"),
            "static_minutes_over": static_over,
        }
        row["slo"] = float(_meets(row, minutes))
        rows[n] = row
    return rows


def _meets(row: dict[str, float], minutes: int) -> bool:
    return bool(
        row["p95"] <= P95_LIMIT
        and row["minutes_over"] <= row["static_minutes_over"] + MINUTES_ALLOWANCE * minutes
        and row["recoveries_over_limit"] == 0
    )


def scenario_table(scen: dict[str, Any], prices: PriceList) -> tuple[pd.DataFrame, dict[int, dict[str, dict[str, float]]]]:
    """(policies x figures, mean over the seeds with the SLO judged on the means and ``seeds_met`` / ``seeds``;
    per seed rows) of one stored scenario."""
    per_seed = {int(s): _seed_rows(e, prices, int(e["minutes"])) for s, e in scen["seeds"].items()}
    per_seed = {s: rows for s, rows in per_seed.items() if rows}
    if not per_seed:
        return pd.DataFrame(), {}
    stacked = pd.concat(
        {s: pd.DataFrame.from_dict(rows, orient="index") for s, rows in per_seed.items()}, names=["seed", "policy"]
    )
    g = stacked.groupby(level="policy", sort=False)
    mean = g.mean()
    minutes = int(next(iter(scen["seeds"].values()))["minutes"])
    slow = g["recoveries_over_limit"].sum()
    mean["slo"] = [
        float(
            r["p95"] <= P95_LIMIT and r["minutes_over"] <= r["static_minutes_over"] + MINUTES_ALLOWANCE * minutes and slow[n] == 0
        )
        for n, r in mean.iterrows()
    ]
    mean["seeds_met"] = g["slo"].sum()
    mean["seeds"] = g.size()
    mean["worst_cpu_x_capped"] = g["cpu_x_capped"].max()
    return mean, per_seed


def _cheapest(rows: dict[str, dict[str, float]]) -> str | None:
    """The policy with the lowest priced cost of those meeting the SLO (``slo`` 1), the oracle aside; None if none does."""
    ok = {n: r["priced_cost"] for n, r in rows.items() if r["slo"] and n not in NOT_COMPETING}
    return min(ok, key=lambda n: ok[n]) if ok else None


def summary(results: dict[str, Any], prices: PriceList) -> pd.DataFrame:
    """Per policy over the scenarios done: the share meeting the SLO (on the mean, and on every seed),
    the share where it is the cheapest of those meeting it (on the mean; on every seed), and the
    median CPU over the capped bound (mean over seeds; worst seed)."""
    stats: dict[str, dict[str, list[float]]] = {}
    for scen in results["scenarios"].values():
        mean, per_seed = scenario_table(scen, prices)
        if mean.empty:
            continue
        best = _cheapest({str(n): r for n, r in mean.to_dict(orient="index").items()})
        seed_best = {s: _cheapest(rows) for s, rows in per_seed.items()}
        for n, r in mean.iterrows():
            name = str(n)
            s = stats.setdefault(
                name,
                {
                    k: []
                    for k in ("slo", "slo_all", "cheapest", "cheapest_all", "capped", "capped_worst", "cpu", "p95", "x_fixed")
                },
            )
            s["slo"].append(float(r["slo"]))
            s["slo_all"].append(float(r["seeds_met"] == len(per_seed) and r["seeds"] == len(per_seed)))
            s["cheapest"].append(float(best == name))
            s["cheapest_all"].append(float(all(b == name for b in seed_best.values())))
            s["capped"].append(float(r["cpu_x_capped"]))
            s["capped_worst"].append(float(r["worst_cpu_x_capped"]))
            s["cpu"].append(float(r["cpu"]))
            s["p95"].append(float(r["p95"]))
            fixed = float(mean.loc[HINDSIGHT, "priced_cost"]) if HINDSIGHT in mean.index else float("nan")
            s["x_fixed"].append(float(r["priced_cost"]) / fixed if fixed > 0 else float("nan"))
    rows = {
        n: {
            "scenarios": len(s["slo"]),
            "slo": float(np.mean(s["slo"])),
            "slo_all": float(np.mean(s["slo_all"])),
            "cheapest": float(np.mean(s["cheapest"])),
            "cheapest_all": float(np.mean(s["cheapest_all"])),
            "capped": float(np.nanmedian(s["capped"])) if not np.isnan(s["capped"]).all() else float("nan"),
            "capped_worst": float(np.nanmedian(s["capped_worst"])) if not np.isnan(s["capped_worst"]).all() else float("nan"),
            "cpu": float(np.median(s["cpu"])),
            "p95": float(np.median(s["p95"])),
            "x_fixed": float(np.nanmedian(s["x_fixed"])) if not np.isnan(s["x_fixed"]).all() else float("nan"),
            "under_fixed": float(np.mean([x < 1.0 for x in s["x_fixed"] if x == x]))
            if any(x == x for x in s["x_fixed"])
            else float("nan"),
        }
        for n, s in stats.items()
    }
    return pd.DataFrame.from_dict(rows, orient="index")


def _pct(x: float) -> str:
    return f"{100 * x:.0f} %"


def render(results: dict[str, Any], prices: PriceList, matrix: list[Scenario]) -> str:
    scens = results["scenarios"]
    order = [sc.name for sc in matrix if sc.name in scens] + [n for n in scens if n not in {sc.name for sc in matrix}]
    lines = [
        "# Robustness: every policy over the scenario matrix",
        "",
        f"Command: `{results['command']}`",
        "",
        *(
            ["Rows kept from earlier runs of (newest last): " + "; ".join(f"`{c}`" for c in results["earlier_commands"]), ""]
            if results.get("earlier_commands")
            else []
        ),
        f"Scenarios done: {len(scens)} of the matrix's {len(matrix)} ({', '.join(order)}). Seeds {results['seeds_text']}; failures `{results['failures']}`, "
        f"recovery limit {results['recovery_limit_s']:g} s, forecaster {results['forecaster']}; matrix `{results['matrix']}`, "
        f"data folder `{results['data']}`"
        + (f", ads profile `{results['profile_ads']}`" if results.get("profile_ads") else "")
        + f"; flinktune code {results['code_version']}.",
        "",
        "The SLO of a scenario: p95 <= 1.5x static's, minutes over the absolute latency target <= static's + 1 % of the "
        "replayed minutes (a minute's p95: the 95th percentile of its per-second p95 samples), and no recovery over the "
        "limit. CPU, memory, priced cost and p95 are relative to static (the space's maximum, all the time) on the same "
        f"seed, profiling included; priced cost: {results['prices']}. CPU / bound: over the replay bound "
        "(`benchmarks/policy/replay_bound.py`: per-second perfect sizing that recovers within the limit, ground truth no "
        "policy has); CPU / capped bound: over the same bound allowed only the policy's own number of changes. "
        f"`{HINDSIGHT}`: the cheapest configuration held all the time that meets the SLO, found by replaying the "
        "trace with hindsight (`benchmarks/policy/fixed_hindsight.py`; an achievable cost, not a proven minimum): a policy "
        "that changes the job must cost less than it to have earned its changes. "
        "Minutes over target, recoveries over the limit and changes are absolute counts per run.",
        "",
        "## Summary over the scenarios done",
        "",
        "Meets SLO: on the mean over seeds / on every seed. Cheapest: the lowest priced cost of the policies meeting the "
        f"SLO (oracle and {HINDSIGHT} excluded), on the mean / on every seed. CPU / capped bound: median over scenarios "
        f"of the mean over seeds / of the worst seed. Priced cost / {HINDSIGHT}: median over scenarios, and the share of "
        "scenarios where it is below 1.",
        "",
        "| policy | scenarios | meets SLO (mean) | meets SLO (every seed) | cheapest (mean) | cheapest (every seed) "
        f"| median CPU / capped bound | (worst seed) | median CPU | median p95 | priced cost / {HINDSIGHT} | (below 1) |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    summ = summary(results, prices)
    for n, r in summ.iterrows():
        lines.append(
            f"| {n} | {int(r['scenarios'])} | {_pct(r['slo'])} | {_pct(r['slo_all'])} | {_pct(r['cheapest'])} | "
            f"{_pct(r['cheapest_all'])} | {r['capped']:.2f} | {r['capped_worst']:.2f} | {r['cpu']:.3f} | {r['p95']:.2f} | "
            f"{r['x_fixed']:.2f} | {_pct(r['under_fixed']) if r['under_fixed'] == r['under_fixed'] else 'n/a'} |"
        )
    lines += ["", "## Per scenario (mean over seeds)", ""]
    current = results["code_version"]
    for name in order:
        scen = scens[name]
        st = scen["settings"]
        mean, _ = scenario_table(scen, prices)
        seeds = sorted(int(s) for s in scen["seeds"])
        minutes = int(next(iter(scen["seeds"].values()))["minutes"]) if scen["seeds"] else 0
        bounds = "; ".join(
            f"seed {s}: {scen['seeds'][str(s)]['bound'].get('per_second', float('nan')):.3f}"
            + (
                f" ({_pct(scen['seeds'][str(s)]['bound']['clipped_share'])} of seconds above what static carries, bounded there)"
                if scen["seeds"][str(s)]["bound"].get("clipped_share")
                else ""
            )
            for s in seeds
        )
        walls = {
            p: [scen["seeds"][str(s)]["policies"][p] for s in seeds if p in scen["seeds"][str(s)]["policies"]] for p in mean.index
        }
        old = sorted({r["code_version"] for s in seeds for r in scen["seeds"][str(s)]["policies"].values()} - {current})
        lines += [
            f"### {name}",
            "",
            f"Trace `{st['trace']}` ({st['trace_transform']}) on profile `{st['profile']}` ({st['perturbation']}), "
            f"latency target {st['latency_target_ms']:g} ms, {st['hours']:g} h replayed"
            + (f" after {st['history_hours']:g} h of history" if st["history_hours"] else "")
            + "".join(f", {n} with {', '.join(f'{k}={v:g}' for k, v in o.items())}" for n, o in st["policy_options"].items())
            + f"; seeds {', '.join(map(str, seeds))}; {minutes} minutes replayed, SLO allowance {MINUTES_ALLOWANCE * minutes:.1f} "
            f"minutes over target beyond static's. Bound (CPU relative to static) per seed: {bounds}. "
            f"Replay wall time (s, one process each, mean over seeds; CPU seconds in brackets): "
            + ", ".join(
                f"{p} {np.mean([r['wall_s'] for r in w]):.0f}"
                + (f" (CPU {np.mean([r['cpu_s'] for r in w]):.0f})" if all("cpu_s" in r for r in w) else "")
                for p, w in walls.items()
                if w
            )
            + f"; {sum(r['wall_s'] for w in walls.values() for r in w):.0f} s in all."
            + _fixed_note(scen, seeds)
            + (f" Rows from earlier code ({', '.join(old)}) are kept for the policies not rerun." if old else ""),
            "",
            "| policy | " + " | ".join(h for _, h, _ in COLUMNS) + " | SLO (mean) | seeds meeting it |",
            "|---" * (len(COLUMNS) + 3) + "|",
        ]
        for n, r in mean.iterrows():
            lines.append(
                f"| {n} | "
                + " | ".join(fmt.format(r[c]) for c, _, fmt in COLUMNS)
                + f" | {'met' if r['slo'] else 'missed'} | {int(r['seeds_met'])}/{int(r['seeds'])} |"
            )
        lines.append("")
    return "\n".join(lines)


def _fixed_note(scen: dict[str, Any], seeds: list[int]) -> str:
    """The configurations the hindsight search found, per seed ('' when it was not run)."""
    found = [(s, scen["seeds"][str(s)]["policies"].get(HINDSIGHT)) for s in seeds]
    shown = [f"seed {s}: {r['config']} ({r['tried']} runs)" for s, r in found if r is not None and "config" in r]
    return f" {HINDSIGHT} per seed: {'; '.join(shown)}." if shown else ""


def write(results: dict[str, Any], out: Path, prices: PriceList, matrix: list[Scenario]) -> None:
    atomic_write(out.with_suffix(".json"), json.dumps(results, indent=1, allow_nan=True).encode())
    atomic_write(out, (render(results, prices, matrix) + "\n").encode())
