"""The report's PNG plots (for the Markdown), every time axis marked with what happened.

Use :func:`write_plots`; it returns the file names written into a folder. Marks on every time
axis: failures (red), reconfigurations (grey dotted), profiling (purple dash-dot) and where
tuning starts (green dashed). Input rate and throughput are drawn in different colours and line
styles; each planned rate is drawn against the peak that came in its horizon.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # no display on servers and CI
import matplotlib.pyplot as plt
import pandas as pd

from flinktune.report.counterfactual import Outcome
from flinktune.report.period import Events, ReportInputs

__all__ = [
    "MARKS",
    "POLICY_COLOURS",
    "SERIES_COLOURS",
    "STATIC_DASH",
    "TUNING_START",
    "drawing_order",
    "planned_against_peak",
    "within",
    "write_plots",
]

#: How each kind of event is drawn (matplotlib and Plotly alike): colour, dash, label.
MARKS: dict[str, tuple[str, str, str]] = {
    "failures": ("#d62728", "solid", "failure"),
    "reconfigurations": ("#555555", "dot", "reconfiguration"),
    "profiling": ("#9467bd", "dashdot", "profiling"),
}
#: Where the tuner took over: colour, dash, label.
TUNING_START: tuple[str, str, str] = ("#006d2c", "dash", "tuning starts")
_MPL_DASH = {"solid": "-", "dot": ":", "dashdot": "-.", "dash": "--"}
#: One colour per policy in every figure, so a policy is the same line in each panel. Static, the yardstick,
#: is black and dashed (:data:`STATIC_DASH`) and drawn last, so it stays visible above the others.
POLICY_COLOURS: dict[str, str] = {
    "flinktune": "#1f77b4",
    "static": "#000000",
    "autoscaler": "#ff7f0e",
    "demeter": "#e377c2",
    "reactive": "#8c564b",
    "ds2": "#7f7f7f",
    "sage": "#bcbd22",
    "barre": "#17becf",
    "oracle": "#393b79",
}
STATIC_DASH = "dash"
#: One colour per other thing drawn; within a figure no two share one, nor one with a mark (a test checks it).
SERIES_COLOURS: dict[str, str] = {
    "input rate": "#252525",
    "throughput": "#17becf",
    "planned rate": "#a6761d",
    "peak that came": "#e6550d",
    "p95 target": "#b8860b",
    "p50": "#9ecae1",
    "p95": "#08519c",
    "parallelism": "#3182bd",
    "TaskManagers": "#fd8d3c",
    "reserved cores": "#31a354",
    "reserved GiB": "#756bb1",
    "used cores": "#636363",
    "heap used GiB": "#a1d99b",
    "static max": "#969696",
    "CPU per TaskManager": "#31a354",
    "slots per TaskManager": "#fd8d3c",
    "GiB per TaskManager": "#756bb1",
    "checkpoint interval (s)": "#3182bd",
}


def drawing_order(outcomes: Iterable[Outcome]) -> list[Outcome]:
    """The policies in the order they are drawn: static last, on top of the others."""
    return sorted(outcomes, key=lambda o: o.policy == "static")


def within(ev: Events, start: pd.Timestamp | None) -> Events:
    """The events from ``start`` on (the same-load views cover the tuned period only)."""
    if start is None:
        return ev
    keep = lambda ts: [t for t in ts if t >= start]  # noqa: E731
    return Events(ev.tuning_start, keep(ev.failures), keep(ev.reconfigurations), keep(ev.profiling))


def planned_against_peak(inputs: ReportInputs) -> pd.DataFrame:
    """Per forecast: ``ts``, the ``planned`` rate and the ``peak`` input rate that came within the horizon."""
    fc, f = inputs.forecasts, inputs.features
    if not len(fc) or not len(f):
        return pd.DataFrame(columns=["ts", "planned", "peak"])
    rows = []
    for r in fc.itertuples(index=False):
        t = pd.to_datetime(float(r.ts), unit="s", utc=True)
        came = f[(f["window_start"] >= t) & (f["window_start"] < t + pd.Timedelta(seconds=inputs.forecast_horizon_s))]
        rows.append(
            {"ts": t, "planned": float(r.planned_rate), "peak": float(came["input_rate"].max()) if len(came) else float("nan")}
        )
    return pd.DataFrame(rows)


def _mark(ax: plt.Axes, ev: Events, legend: bool) -> None:
    for kind, (colour, dash, label) in MARKS.items():
        for i, t in enumerate(getattr(ev, kind)):
            ax.axvline(t, color=colour, ls=_MPL_DASH[dash], lw=0.8, alpha=0.8, label=label if legend and i == 0 else None)
    if ev.tuning_start is not None:
        colour, dash, label = TUNING_START
        ax.axvline(ev.tuning_start, color=colour, ls=_MPL_DASH[dash], lw=1.6, label=label if legend else None)


def _save(fig: plt.Figure, path: Path) -> None:
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _rate(inputs: ReportInputs, ev: Events, path: Path) -> None:
    f = inputs.features
    fig, ax = plt.subplots(figsize=(11, 4))
    ax.plot(f["window_start"], f["input_rate"], color=SERIES_COLOURS["input rate"], lw=1.1, label="input rate")
    ax.plot(f["window_start"], f["throughput"], color=SERIES_COLOURS["throughput"], lw=0.9, ls="--", label="throughput")
    for i, row in enumerate(inputs.forecasts.itertuples(index=False)):
        bins = pd.DataFrame(json.loads(row.bins))
        t = pd.to_datetime(bins["bin_start"], unit="ms", utc=True)
        lo, hi = ("q0.1", "q0.9") if {"q0.1", "q0.9"} <= set(bins.columns) else ("q0.5", "q0.99")
        if {lo, hi} <= set(bins.columns):
            ax.fill_between(
                t,
                bins[lo],
                bins[hi],
                color=SERIES_COLOURS["planned rate"],
                alpha=0.15,
                label=f"forecast {lo}-{hi}" if i == 0 else None,
            )
    pk = planned_against_peak(inputs)
    if len(pk):
        h = pd.Timedelta(seconds=inputs.forecast_horizon_s)
        for i, r in enumerate(pk.itertuples(index=False)):
            ax.hlines(
                r.planned,
                r.ts,
                r.ts + h,
                color=SERIES_COLOURS["planned rate"],
                lw=2,
                label="planned rate" if i == 0 else "_nolegend_",
            )
        ax.scatter(
            pk["ts"] + h / 2,
            pk["peak"],
            color=SERIES_COLOURS["peak that came"],
            marker="^",
            s=22,
            zorder=5,
            label="peak that came",
        )
    _mark(ax, ev, legend=True)
    ax.set_ylabel("records / s")
    ax.set_title(f"{inputs.job}: input rate, throughput, and the planned rate against the peak that came")
    ax.legend(loc="upper left", fontsize=7, ncol=4)
    _save(fig, path)


def _config(inputs: ReportInputs, ev: Events, path: Path) -> None:
    f = inputs.features
    fig, axes = plt.subplots(3, 1, figsize=(11, 6), sharex=True)
    axes[0].step(f["window_start"], f["parallelism"], where="post", color=SERIES_COLOURS["parallelism"], label="parallelism")
    axes[0].step(f["window_start"], f["taskmanagers"], where="post", color=SERIES_COLOURS["TaskManagers"], label="TaskManagers")
    axes[1].step(
        f["window_start"], f["cpu"], where="post", color=SERIES_COLOURS["CPU per TaskManager"], label="CPU per TaskManager"
    )
    axes[1].step(
        f["window_start"],
        f["task_slots"],
        where="post",
        color=SERIES_COLOURS["slots per TaskManager"],
        label="slots per TaskManager",
    )
    axes[1].step(
        f["window_start"],
        f["memory_mb"] / 1024.0,
        where="post",
        color=SERIES_COLOURS["GiB per TaskManager"],
        label="GiB per TaskManager",
    )
    axes[2].step(
        f["window_start"],
        f["checkpoint_interval_s"],
        where="post",
        color=SERIES_COLOURS["checkpoint interval (s)"],
        label="checkpoint interval (s)",
    )
    axes[2].set_ylim(0, max(100, float(f["checkpoint_interval_s"].max()) + 10))
    for i, ax in enumerate(axes):
        _mark(ax, ev, legend=i == 0)
        ax.legend(fontsize=7, loc="upper left", ncol=3)
    axes[0].set_title(f"{inputs.job}: configuration over time")
    _save(fig, path)


def _latency(inputs: ReportInputs, ev: Events, path: Path) -> None:
    f = inputs.features
    fig, ax = plt.subplots(figsize=(11, 3.6))
    ax.plot(f["window_start"], f["latency_p50_ms"], lw=0.8, color=SERIES_COLOURS["p50"], label="p50")
    ax.plot(f["window_start"], f["latency_p95_ms"], lw=0.8, color=SERIES_COLOURS["p95"], label="p95")
    ax.axhline(inputs.latency_target_ms, color=SERIES_COLOURS["p95 target"], ls="--", lw=1.2, label="p95 target")
    _mark(ax, ev, legend=True)
    ax.set_yscale("log")
    ax.set_ylabel("ms")
    ax.set_title(f"{inputs.job}: end-to-end latency")
    ax.legend(fontsize=7, loc="upper left", ncol=4)
    _save(fig, path)


def _resources(inputs: ReportInputs, ev: Events, path: Path) -> None:
    f = inputs.features
    fig, axes = plt.subplots(2, 1, figsize=(11, 5), sharex=True)
    c = SERIES_COLOURS
    axes[0].step(f["window_start"], f["taskmanagers"] * f["cpu"], where="post", color=c["reserved cores"], label="reserved cores")
    axes[0].plot(f["window_start"], f["cpu_used"], lw=0.8, color=c["used cores"], label="used cores")
    axes[0].axhline(inputs.space.maximum.total_cpu, color=c["static max"], ls="--", lw=1, label="static max")
    axes[1].step(
        f["window_start"],
        f["taskmanagers"] * f["memory_mb"] / 1024.0,
        where="post",
        color=c["reserved GiB"],
        label="reserved GiB",
    )
    axes[1].plot(f["window_start"], f["memory_used_mb"] / 1024.0, lw=0.8, color=c["heap used GiB"], label="heap used GiB")
    axes[1].axhline(inputs.space.maximum.total_memory_mb / 1024.0, color=c["static max"], ls="--", lw=1, label="static max")
    for i, ax in enumerate(axes):
        _mark(ax, ev, legend=i == 0)
        ax.legend(fontsize=7, loc="upper left", ncol=4)
    axes[0].set_title(f"{inputs.job}: resources")
    _save(fig, path)


def _same_load(inputs: ReportInputs, ev: Events, path: Path) -> None:
    cmp = inputs.comparison
    assert cmp is not None
    fig, axes = plt.subplots(3, 1, figsize=(11, 8), sharex=True)
    ev = within(ev, ev.tuning_start)
    for o in drawing_order(cmp.outcomes.values()):
        m = o.minutes
        static = o.policy == "static"
        style = {
            "lw": 1.6 if o.actual or static else 0.9,
            "alpha": 1.0 if o.actual or static else 0.8,
            "color": POLICY_COLOURS.get(o.policy),
            "ls": _MPL_DASH[STATIC_DASH] if static else "-",
        }
        axes[0].plot(m.index, m["latency_p95_max_ms"], label=o.label, **style)
        axes[1].plot(m.index, m["total_cpu"], **style)
        cost_per_min = cmp.prices.cost(m["total_cpu"] / 60.0, m["total_memory_mb"] / 1024.0 / 60.0)
        axes[2].plot(m.index, cost_per_min.cumsum(), **style)
    axes[0].axhline(cmp.latency_target_ms, color=SERIES_COLOURS["p95 target"], ls="--", lw=1.2, label="p95 target")
    axes[0].set_yscale("log")
    axes[0].set_ylabel("p95 ms (each minute's)")
    axes[1].set_ylabel("reserved cores")
    axes[2].set_ylabel(f"running cost, {cmp.prices.currency}")
    for i, ax in enumerate(axes):
        _mark(ax, ev, legend=i == 0)
    axes[0].legend(fontsize=7, loc="upper left", ncol=3)
    axes[0].set_title(f"{inputs.job}: the same load under each policy (marks: this run's events)")
    _save(fig, path)


def write_plots(inputs: ReportInputs, ev: Events, folder: Path) -> list[str]:
    """Write the PNGs into ``folder``; returns their file names in reading order."""
    plots = [
        ("rate_forecast.png", _rate),
        ("configuration.png", _config),
        ("latency.png", _latency),
        ("resources.png", _resources),
    ]
    if inputs.comparison is not None:
        plots.insert(0, ("same_load.png", _same_load))
    for name, draw in plots:
        draw(inputs, ev, folder / name)
    return [name for name, _ in plots]
