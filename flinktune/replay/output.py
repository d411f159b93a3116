"""Write a replay's results: a Markdown table, JSON, and plots, each written atomically.

Use :func:`write_results` after :func:`flinktune.replay.runner.run_replay`. Files in ``out_dir``:
``replay-<trace>.md`` (the table relative to static and the command that made it),
``replay-<trace>.json`` (absolute and relative rows, settings, decisions), and
``replay-<trace>-cost.png`` / ``replay-<trace>-timeline.png``.
"""

from __future__ import annotations

import json
from functools import partial
from pathlib import Path
from typing import Any

import pandas as pd

from flinktune.lake.atomic import atomic_write, atomic_write_with
from flinktune.pricing import PriceList, load_prices
from flinktune.replay.harness import PolicyRun
from flinktune.replay.metrics import relative_table

__all__ = ["markdown_table", "mode_cost_note", "mode_cost_table", "priced_relative_table", "write_results"]

_HEAD = [
    ("cpu_core_hours", "CPU", "{:.2f}"),
    ("memory_gib_hours", "memory", "{:.2f}"),
    ("latency_p50_ms", "p50", "{:.2f}"),
    ("latency_p95_ms", "p95", "{:.2f}"),
    ("latency_p99_ms", "p99", "{:.2f}"),
    ("mean_lag", "mean lag", "{:.2f}"),
    ("recovery_mean_s", "recovery mean s", "{:.0f}"),
    ("recoveries_over_limit", "recoveries > limit", "{:.0f}"),
    ("reconfigurations", "reconfigurations", "{:.0f}"),
    ("downtime_s", "downtime s", "{:.0f}"),
    ("profiling_runs", "profiling runs", "{:.0f}"),
    ("priced_cost", "priced cost", "{:.2f}"),
]


def markdown_table(table: pd.DataFrame) -> str:
    """The relative table as Markdown (CPU, memory, latency, lag and priced cost, when present, as ratios to static)."""
    head = [h for h in _HEAD if h[0] in table.columns]
    lines = ["| policy | " + " | ".join(h for _, h, _ in head) + " |", "|---" * (len(head) + 1) + "|"]
    for name, row in table.iterrows():
        lines.append(f"| {name} | " + " | ".join(fmt.format(row[c]) for c, _, fmt in head) + " |")
    return "\n".join(lines)


def _mode_totals(runs: dict[str, PolicyRun]) -> dict[str, dict[str, float]]:
    # Per policy and mode: total downtime and worst added latency; an impossible in-place rescale falls back to redeploy.
    out: dict[str, dict[str, float]] = {}
    for name, run in runs.items():
        c = run.mode_costs
        row: dict[str, float] = {"changes": 0.0}
        if c is not None and len(c):
            wide = c.pivot(index="ts", columns="mode")
            row["changes"] = float(len(wide))
            for mode in ("redeploy", "rescale", "migrate"):
                ok = wide[("feasible", mode)].astype(bool)
                down = wide[("downtime_s", mode)].where(ok, wide[("downtime_s", "redeploy")])
                lat = wide[("added_latency_ms", mode)].where(ok, wide[("added_latency_ms", "redeploy")])
                row[f"{mode}_downtime_s"], row[f"{mode}_worst_ms"] = float(down.sum()), float(lat.max())
                row[f"{mode}_fallbacks"] = float((~ok).sum())
        out[name] = row
    return out


def mode_cost_table(runs: dict[str, PolicyRun]) -> str:
    """Markdown: per policy, total downtime and worst added latency its changes would cost in each mode."""
    lines = [
        "| policy | changes | redeploy down s | redeploy worst added ms | in-place down s | in-place worst added ms "
        "| live migration down s | live migration worst added ms |",
        "|---" * 8 + "|",
    ]
    for name, r in _mode_totals(runs).items():
        if not r["changes"]:
            lines.append(f"| {name} | 0 | 0 | - | 0 | - | 0 | - |")
            continue
        fb = f" ({r['rescale_fallbacks']:.0f} redeploy)" if r["rescale_fallbacks"] else ""
        lines.append(
            f"| {name} | {r['changes']:.0f} | {r['redeploy_downtime_s']:.0f} | {r['redeploy_worst_ms']:.0f} | "
            f"{r['rescale_downtime_s']:.0f}{fb} | {r['rescale_worst_ms']:.0f} | {r['migrate_downtime_s']:.0f} | {r['migrate_worst_ms']:.0f} |"
        )
    return "\n".join(lines)


def mode_cost_note(runs: dict[str, PolicyRun]) -> str:
    """One closing sentence quoting the section: what live migration would have saved over all policies."""
    t = [r for r in _mode_totals(runs).values() if r["changes"]]
    if not t:
        return "Reconfiguration cost by mode: no policy changed the configuration."
    red, res, mig = (sum(r[f"{m}_downtime_s"] for r in t) for m in ("redeploy", "rescale", "migrate"))
    worst = {m: max(r[f"{m}_worst_ms"] for r in t) for m in ("redeploy", "rescale", "migrate")}
    return (
        f"Reconfiguration cost by mode: over all policies' changes, pause-and-restart would cost {red:.0f} s of downtime "
        f"(worst added latency {worst['redeploy']:.0f} ms), in-place rescale {res:.0f} s ({worst['rescale']:.0f} ms), "
        f"live state migration {mig:.0f} s ({worst['migrate']:.0f} ms)."
    )


def _plots(runs: dict[str, PolicyRun], table: pd.DataFrame, out: Path, stem: str) -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    paths = []
    fig, ax = plt.subplots(figsize=(9, 4))
    x = range(len(table))
    ax.bar([i - 0.2 for i in x], table["cpu_core_hours"], width=0.4, label="CPU")
    ax.bar([i + 0.2 for i in x], table["memory_gib_hours"], width=0.4, label="memory")
    ax.set_xticks(list(x), list(table.index), rotation=30)
    ax.axhline(1.0, color="k", lw=0.8)
    ax.set_ylabel("relative to static")
    ax.legend()
    fig.tight_layout()
    paths.append(atomic_write_with(out / f"{stem}-cost.png", partial(fig.savefig, dpi=100, format="png")))
    plt.close(fig)
    fig, axes = plt.subplots(3, 1, figsize=(10, 8), sharex=True)
    for name, run in runs.items():
        m = run.minutes
        axes[0].plot(m.index, m["total_cpu"], label=name, lw=0.9)
        axes[1].plot(m.index, m["latency_p95_ms"].clip(upper=5000), lw=0.7)
    first = next(iter(runs.values())).minutes
    axes[2].plot(first.index, first["rate"], color="k", lw=0.8)
    axes[0].set_ylabel("reserved cores")
    axes[1].set_ylabel("p95 ms (clipped 5 s)")
    axes[2].set_ylabel("input rec/s")
    axes[0].legend(ncol=5, fontsize=7)
    fig.tight_layout()
    paths.append(atomic_write_with(out / f"{stem}-timeline.png", partial(fig.savefig, dpi=100, format="png")))
    plt.close(fig)
    return paths


def priced_relative_table(
    summaries: dict[str, dict[str, float]], prices: PriceList, reference: str = "static"
) -> tuple[pd.DataFrame, dict[str, float]]:
    """(:func:`~flinktune.replay.metrics.relative_table` plus a ``priced_cost`` column relative to
    ``reference``'s, each policy's absolute priced cost): what every replay table reports."""
    table = relative_table(summaries, reference)
    priced = {n: prices.cost(s["cpu_core_hours"], s["memory_gib_hours"]) for n, s in summaries.items()}
    table["priced_cost"] = [priced[n] / priced[reference] if priced[reference] else float("nan") for n in table.index]
    return table, priced


def write_results(
    runs: dict[str, PolicyRun],
    out_dir: str | Path,
    trace_name: str,
    meta: dict[str, Any],
    *,
    plots: bool = True,
    prices: PriceList | None = None,
) -> dict[str, Path]:
    """Write the table, JSON and plots for ``runs`` (must include static); returns the paths by kind.

    ``prices`` (default :func:`flinktune.pricing.load_prices`) prices each run's core-hours and
    GiB-hours, profiling included: the table's priced cost is relative to static's, the JSON absolute."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    prices = prices or load_prices()
    table, priced = priced_relative_table({n: r.summary for n, r in runs.items()}, prices)
    stem = f"replay-{trace_name}"
    md = [
        f"# Replay: {trace_name}",
        "",
        f"Command: `{meta.get('command', '')}`",
        "",
        "CPU, memory, latency quantiles and mean lag are relative to static (24 x (1 CPU, 4 GiB)); "
        "CPU and memory include profiling. Recovery, reconfigurations and downtime are absolute. "
        f"Priced cost: core-hours and GiB-hours at {prices.describe()}; static costs {prices.money(priced['static'])} "
        f"over the {meta.get('hours', '?')} h.",
        "",
        markdown_table(table),
        "",
        "## Reconfiguration cost by mode",
        "",
        "What each policy's changes would cost carried out by savepoint redeploy, in-place rescale (parallelism-only "
        "changes; others fall back to redeploy) or live fine-grained state migration (a what-if; see "
        "flinktune/twin/reconfig_modes.py). Added latency: the worst extra wait of a record during one change.",
        "",
        mode_cost_table(runs),
        "",
        mode_cost_note(runs),
        "",
        f"Settings: `{json.dumps({k: v for k, v in meta.items() if k != 'command'}, default=str)}`",
        "",
    ]
    paths = {"markdown": out / f"{stem}.md", "json": out / f"{stem}.json"}
    atomic_write(paths["markdown"], "\n".join(md).encode())
    doc = {
        "meta": meta,
        "absolute": {n: r.summary for n, r in runs.items()},
        "relative": json.loads(table.to_json(orient="index")),
        "priced_cost": priced,
        "prices": prices.model_dump(),
        "wall_s": {n: r.wall_s for n, r in runs.items()},
        "decisions": {n: r.decisions for n, r in runs.items()},
        "reconfiguration_cost_by_mode": _mode_totals(runs),
    }
    atomic_write(paths["json"], json.dumps(doc, indent=1, default=str, allow_nan=True).encode())
    if plots:
        cost, timeline = _plots(runs, table, out, stem)
        paths["cost_plot"], paths["timeline_plot"] = cost, timeline
    return paths
