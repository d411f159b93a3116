"""What a report says, as plain data both templates render: verdict, money, the same-load table,
the context of the hours before tuning, every decision in plain words, and the data quality of
the batches the report rests on.

Use :func:`report_content` on :class:`flinktune.report.period.ReportInputs` (features already cut
to the report's period); the Markdown and HTML templates (:mod:`flinktune.report.render`) only
lay it out, so the two never disagree.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pandas as pd

from flinktune.report.counterfactual import POLICY_LABELS
from flinktune.report.latency import P95_DEFINITION
from flinktune.report.period import ReportInputs, summarise, tuned_start
from flinktune.report.quality import data_quality_content
from flinktune.report.spread import Spread, span
from flinktune.report.verdict import Goals, Verdict, judge, judge_alone
from flinktune.report.wording import headline_and_detail, plain_config

__all__ = ["report_content", "verdict_of"]


def _ms(v: float) -> str:
    return f"{v / 1000:,.1f} s" if v >= 10_000 else f"{v:,.0f} ms"


def verdict_of(inputs: ReportInputs, goals: Goals | None = None) -> Verdict:
    """Against static on the same load when there is a comparison; else against the target and static's reservation."""
    if inputs.comparison is not None:
        return judge(inputs.comparison, goals)
    f, start = inputs.features, tuned_start(inputs)
    tuned = f[f["window_start"] >= start] if start is not None and (f["window_start"] >= start).any() else f
    mx = inputs.space.maximum
    return judge_alone(
        inputs.policy,
        summarise(inputs, tuned),
        static_cpu=mx.total_cpu,
        static_memory_gib=mx.total_memory_mb / 1024.0,
        latency_target_ms=inputs.latency_target_ms,
        prices=inputs.prices,
        goals=goals,
    )


def _same_load_table(inputs: ReportInputs) -> dict[str, Any] | None:
    cmp = inputs.comparison
    if cmp is None:
        return None
    money, limit = cmp.prices.money, cmp.recovery_limit_s
    rows = [
        ("priced cost (profiling included)", lambda m: money(m["priced_cost"])),
        ("CPU core-hours (of which profiling)", lambda m: f"{m['cpu_core_hours']:.1f} ({m['profiling_cpu_core_hours']:.1f})"),
        (
            "memory GiB-hours (of which profiling)",
            lambda m: f"{m['memory_gib_hours']:.1f} ({m['profiling_memory_gib_hours']:.1f})",
        ),
        ("p95 latency", lambda m: _ms(m["latency_p95_ms"])),
        (f"minutes over the {_ms(cmp.latency_target_ms)} target", lambda m: f"{m['minutes_over_target']:.0f}"),
        (f"recoveries over {limit:.0f} s / failures", lambda m: f"{m['recoveries_over_limit']:.0f} / {m['failures']:.0f}"),
        ("slowest recovery", lambda m: f"{m['recovery_max_s']:.0f} s"),
        (
            "reconfigurations (seconds not running, failures included)",
            lambda m: f"{m['reconfigurations']:.0f} ({m['downtime_s']:.0f} s)",
        ),
        ("profiling runs", lambda m: f"{m['profiling_runs']:.0f}"),
    ]
    heads = [o.label for o in cmp.outcomes.values()]
    body = [{"measure": label, "cells": [fmt(o.measures) for o in cmp.outcomes.values()]} for label, fmt in rows]
    return {"heads": heads, "rows": body, "note": cmp.note, "hours": cmp.hours}


def _ranged(mean: float, lo: float, hi: float, number: str, *, before: str = "", after: str = "") -> str:
    """``before`` mean ``after`` (min-max), e.g. ``USD 3.41 (3.30-3.55)``; ``number`` a format spec."""
    return f"{before}{mean:{number}}{after} ({span(f'{lo:{number}}', f'{hi:{number}}')})"


def _ms_ranged(mean: float, lo: float, hi: float) -> str:
    if mean >= 10_000:  # in seconds, as _ms states it, the range in the same unit
        return _ranged(mean / 1000, lo / 1000, hi / 1000, ",.1f", after=" s")
    return _ranged(mean, lo, hi, ",.0f", after=" ms")


def _spread_table(inputs: ReportInputs) -> dict[str, Any] | None:
    cmp = inputs.comparison
    spread = cmp.spread if cmp is not None else None
    if cmp is None or spread is None:
        return None
    cur = cmp.prices.currency
    rows: list[tuple[str, str, Callable[[float, float, float], str]]] = [
        ("priced cost (profiling included)", "priced_cost", lambda m, lo, hi: _ranged(m, lo, hi, ",.2f", before=f"{cur} ")),
        ("CPU core-hours", "cpu_core_hours", lambda m, lo, hi: _ranged(m, lo, hi, ",.1f")),
        ("p95 latency", "latency_p95_ms", _ms_ranged),
        (
            f"minutes over the {_ms(cmp.latency_target_ms)} target",
            "minutes_over_target",
            lambda m, lo, hi: _ranged(m, lo, hi, ",.0f"),
        ),
    ]
    names = [k for k in cmp.outcomes if k in spread.measures]
    heads = [cmp.outcomes[k].label for k in names]
    body = [{"measure": label, "cells": [fmt(*spread.range(k, key)) for k in names]} for label, key, fmt in rows]
    first, rest = spread.seeds[0], [str(s) for s in spread.seeds[1:]]
    note = (
        f"Mean (min-max) over {len(spread.seeds)} seeds of the same {cmp.hours:.1f} h: seed {first} is the run's own (the "
        f"table above); on seed{'s' if len(rest) > 1 else ''} {', '.join(rest)} the twin's noise and random failures and "
        "each policy's model seeds are drawn anew, from the same state and input."
    )
    if spread.replayed:
        note += (
            f" {POLICY_LABELS.get(spread.replayed, spread.replayed)} on {'those seeds' if len(rest) > 1 else 'that seed'} is "
            "its policy replayed like the others (its models trained inside the replay): the run itself happened once."
        )
    elif cmp.actual not in spread.measures:
        note += f" {cmp.run.label} cannot be replayed, so it has no spread and no money per month."
    return {"heads": heads, "rows": body, "note": note, "seeds": len(spread.seeds)}


def _per_month(spread: Spread | None, run: str, against: str, currency: str) -> str:
    """``saves USD a (b-c) per month over N seeds``, or "" without a spread for both."""
    if spread is None or run not in spread.measures or against not in spread.measures:
        return ""
    mean, lo, hi = spread.per_month(run, against)
    n = len(spread.seeds)
    if mean >= 0:
        return f"saves {_ranged(mean, lo, hi, ',.2f', before=f'{currency} ')} per month over {n} seeds"
    return f"costs {_ranged(-mean, -hi, -lo, ',.2f', before=f'{currency} ')} more per month over {n} seeds"


def _money(inputs: ReportInputs) -> dict[str, Any] | None:
    cmp = inputs.comparison
    if cmp is None:
        return None
    run = cmp.run.measures
    lines = []
    for name, o in cmp.outcomes.items():
        if o.actual:
            continue
        month = _per_month(cmp.spread, cmp.actual, name, cmp.prices.currency)
        text = _saved(run["priced_cost"], o.measures["priced_cost"], cmp)
        lines.append({"against": o.label, "text": text, "per_month": month})
    prof = cmp.prices.cost(run["profiling_cpu_core_hours"], run["profiling_memory_gib_hours"])
    static = cmp.outcomes.get("static")
    running = None
    if static is not None and not static.actual and prof > 0:  # what the configurations alone cost, profiling set apart
        running = _saved(run["priced_cost"] - prof, static.measures["priced_cost"], cmp)
    return {
        "lines": lines,
        "prices": cmp.prices.describe(),
        "hours": cmp.hours,
        "profiling": cmp.prices.money(prof),
        "profiling_runs": int(run["profiling_runs"]),
        "running_vs_static": running,
    }


def _saved(cost: float, other: float, cmp: Any) -> str:
    # One run over a few hours: money per month only over seeds, with their spread (_per_month).
    saved, money = other - cost, cmp.prices.money
    if abs(saved) < 0.005:
        return f"the same cost over these {cmp.hours:.1f} h: nothing saved"
    head = f"saved {money(saved)}" if saved > 0 else f"cost {money(-saved)} more"
    return f"{head} over these {cmp.hours:.1f} h, {cost / other if other else float('nan'):.2f} x the cost"


def _context_table(inputs: ReportInputs, whole: dict[str, float]) -> dict[str, Any] | None:
    f, start = inputs.features, tuned_start(inputs)
    periods = [("whole period", whole)]
    if start is not None and (f["window_start"] < start).any() and (f["window_start"] >= start).any():
        periods = [
            ("before tuning", summarise(inputs, f[f["window_start"] < start])),
            ("tuned", summarise(inputs, f[f["window_start"] >= start])),
        ]
    if inputs.comparison is not None:
        # The tuned hours are stated once, in the same-load table; here only the hours before them.
        periods = [p for p in periods if p[0] == "before tuning"]
        if not periods:
            return None
    money = inputs.prices.money
    rows = [
        ("hours", lambda s: f"{s['hours']:.1f}"),
        ("reserved CPU core-hours", lambda s: f"{s['cpu_core_hours']:.1f} ({s['cpu_vs_static']:.2f} x static max)"),
        ("reserved memory GiB-hours", lambda s: f"{s['memory_gib_hours']:.1f} ({s['memory_vs_static']:.2f} x static max)"),
        ("priced reservation (no profiling)", lambda s: money(s["priced_cost"])),
        ("latency p50 (median of minutes)", lambda s: _ms(s["latency_p50_ms"])),
        ("p95 latency", lambda s: _ms(s["latency_p95_ms"])),
        (f"minutes over the {_ms(inputs.latency_target_ms)} target", lambda s: f"{s['minutes_over_target']}"),
        ("mean consumer lag", lambda s: f"{s['mean_lag']:,.0f} records"),
        ("reconfigurations", lambda s: f"{s['reconfigurations']}"),
    ]
    return {
        "heads": [name for name, _ in periods],
        "rows": [{"measure": label, "cells": [fmt(s) for _, s in periods]} for label, fmt in rows],
    }


def _decisions(inputs: ReportInputs) -> list[dict[str, str]]:
    out = []
    for row in inputs.decisions.itertuples(index=False):
        head, detail = headline_and_detail(str(row.reason))
        applied = f"{row.mode}, {row.downtime_s:.0f} s down" if int(row.changed) else ("dry run" if int(row.dry_run) else "-")
        out.append(
            {
                "time": pd.to_datetime(row.ts, unit="s", utc=True).strftime("%Y-%m-%d %H:%M"),
                "policy": str(row.policy),
                "action": str(row.action),
                "applied": applied,
                "headline": head,
                "detail": detail,
            }
        )
    return out


def report_content(inputs: ReportInputs, goals: Goals | None = None) -> dict[str, Any]:
    """Everything the templates render (plain strings and numbers), plus ``summary`` for summary.json."""
    f = inputs.features
    whole = summarise(inputs)
    verdict = verdict_of(inputs, goals)
    mx = inputs.space.maximum
    start = tuned_start(inputs)
    return {
        "job": inputs.job,
        "period": f"{f['window_start'].min():%Y-%m-%d %H:%M} to {f['window_start'].max() + pd.Timedelta(minutes=1):%Y-%m-%d %H:%M} UTC "
        f"({whole['hours']:.1f} h of per-minute features)",
        "tuning_start": f"{start:%Y-%m-%d %H:%M} UTC" if start is not None else None,
        "target": _ms(inputs.latency_target_ms),
        "p95_definition": P95_DEFINITION,
        "static": plain_config(mx.parallelism, mx.task_slots, mx.taskmanagers, mx.cpu, mx.memory_mb, mx.checkpoint_interval_s),
        "prices": inputs.prices.describe(),
        "tracking": inputs.tracking_note,
        "verdict": verdict.to_dict()
        | {"checks": [{"goal": c.goal, "word": c.word, "met": c.met, "sentence": c.sentence} for c in verdict.checks]},
        "same_load": _same_load_table(inputs),
        "spread": _spread_table(inputs),
        "no_comparison": (
            inputs.comparison_note
            or "No counterfactual on the same load was given to this report, so the verdict "
            "judges latency against the target itself and cost against static's reservation."
        )
        if inputs.comparison is None
        else "",
        "money": _money(inputs),
        "context": _context_table(inputs, whole),
        "decisions": _decisions(inputs),
        "data_quality": data_quality_content(inputs.data_quality),
        "summary": whole,
        "verdict_obj": verdict,
    }
