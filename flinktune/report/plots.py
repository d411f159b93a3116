"""The report's PNG plots (for the Markdown), every time axis marked with what happened.

Use :func:`write_plots`; it returns the file names written into a folder. Marks on every time
axis: failures (red), reconfigurations (grey dotted), profiling (purple dash-dot) and where
tuning starts (green dashed). Input rate and throughput are drawn in different colours and line
styles; each planned rate is drawn against the peak that came in its horizon.
"""

from __future__ import annotations

import json
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # no display on servers and CI
import matplotlib.pyplot as plt
import pandas as pd

from flinktune.report.period import Events, ReportInputs

__all__ = ["MARKS", "POLICY_COLOURS", "planned_against_peak", "within", "write_plots"]

#: How each kind of event is drawn (matplotlib and Plotly alike): colour, dash, label.
MARKS: dict[str, tuple[str, str, str]] = {
    "failures": ("#d62728", "solid", "failure"),
    "reconfigurations": ("#555555", "dot", "reconfiguration"),
    "profiling": ("#9467bd", "dashdot", "profiling"),
}
_MPL_DASH = {"solid": "-", "dot": ":", "dashdot": "-.", "dash": "--"}
#: One colour per policy in every figure, so a policy is the same line in each panel.
POLICY_COLOURS: dict[str, str] = {
    "flinktune": "#1f77b4",
    "static": "#7f7f7f",
    "autoscaler": "#ff7f0e",
    "demeter": "#2ca02c",
    "reactive": "#8c564b",
    "ds2": "#e377c2",
    "sage": "#bcbd22",
    "barre": "#17becf",
    "oracle": "#000000",
}


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
        ax.axvline(ev.tuning_start, color="tab:green", ls="--", lw=1.6, label="tuning starts" if legend else None)


def _save(fig: plt.Figure, path: Path) -> None:
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _rate(inputs: ReportInputs, ev: Events, path: Path) -> None:
    f = inputs.features
    fig, ax = plt.subplots(figsize=(11, 4))
    ax.plot(f["window_start"], f["input_rate"], color="black", lw=1.1, label="input rate")
    ax.plot(f["window_start"], f["throughput"], color="tab:cyan", lw=0.9, ls="--", label="throughput")
    for i, row in enumerate(inputs.forecasts.itertuples(index=False)):
        bins = pd.DataFrame(json.loads(row.bins))
        t = pd.to_datetime(bins["bin_start"], unit="ms", utc=True)
        lo, hi = ("q0.1", "q0.9") if {"q0.1", "q0.9"} <= set(bins.columns) else ("q0.5", "q0.99")
        if {lo, hi} <= set(bins.columns):
            ax.fill_between(t, bins[lo], bins[hi], color="tab:red", alpha=0.12, label=f"forecast {lo}-{hi}" if i == 0 else None)
    pk = planned_against_peak(inputs)
    if len(pk):
        h = pd.Timedelta(seconds=inputs.forecast_horizon_s)
        for i, r in enumerate(pk.itertuples(index=False)):
            ax.hlines(r.planned, r.ts, r.ts + h, color="tab:red", lw=2, label="planned rate" if i == 0 else "_nolegend_")
        ax.scatter(pk["ts"] + h / 2, pk["peak"], color="tab:orange", marker="^", s=22, zorder=5, label="peak that came")
    _mark(ax, ev, legend=True)
    ax.set_ylabel("records / s")
    ax.set_title(f"{inputs.job}: input rate, throughput, and the planned rate against the peak that came")
    ax.legend(loc="upper left", fontsize=7, ncol=4)
    _save(fig, path)


def _config(inputs: ReportInputs, ev: Events, path: Path) -> None:
    f = inputs.features
    fig, axes = plt.subplots(3, 1, figsize=(11, 6), sharex=True)
    axes[0].step(f["window_start"], f["parallelism"], where="post", label="parallelism")
    axes[0].step(f["window_start"], f["taskmanagers"], where="post", label="TaskManagers")
    axes[1].step(f["window_start"], f["cpu"], where="post", label="CPU per TaskManager")
    axes[1].step(f["window_start"], f["task_slots"], where="post", label="slots per TaskManager")
    axes[1].step(f["window_start"], f["memory_mb"] / 1024.0, where="post", label="GiB per TaskManager")
    axes[2].step(f["window_start"], f["checkpoint_interval_s"], where="post", label="checkpoint interval (s)")
    axes[2].set_ylim(0, max(100, float(f["checkpoint_interval_s"].max()) + 10))
    for i, ax in enumerate(axes):
        _mark(ax, ev, legend=i == 0)
        ax.legend(fontsize=7, loc="upper left", ncol=3)
    axes[0].set_title(f"{inputs.job}: configuration over time")
    _save(fig, path)


def _latency(inputs: ReportInputs, ev: Events, path: Path) -> None:
    f = inputs.features
    fig, ax = plt.subplots(figsize=(11, 3.6))
    ax.plot(f["window_start"], f["latency_p50_ms"], lw=0.8, label="p50")
    ax.plot(f["window_start"], f["latency_p95_ms"], lw=0.8, label="p95")
    ax.axhline(inputs.latency_target_ms, color="tab:red", ls="--", lw=1, label="p95 target")
    _mark(ax, ev, legend=True)
    ax.set_yscale("log")
    ax.set_ylabel("ms")
    ax.set_title(f"{inputs.job}: end-to-end latency")
    ax.legend(fontsize=7, loc="upper left", ncol=4)
    _save(fig, path)


def _resources(inputs: ReportInputs, ev: Events, path: Path) -> None:
    f = inputs.features
    fig, axes = plt.subplots(2, 1, figsize=(11, 5), sharex=True)
    axes[0].step(f["window_start"], f["taskmanagers"] * f["cpu"], where="post", label="reserved cores")
    axes[0].plot(f["window_start"], f["cpu_used"], lw=0.8, label="used cores")
    axes[0].axhline(inputs.space.maximum.total_cpu, color="grey", ls="--", lw=1, label="static max")
    axes[1].step(f["window_start"], f["taskmanagers"] * f["memory_mb"] / 1024.0, where="post", label="reserved GiB")
    axes[1].plot(f["window_start"], f["memory_used_mb"] / 1024.0, lw=0.8, label="heap used GiB")
    axes[1].axhline(inputs.space.maximum.total_memory_mb / 1024.0, color="grey", ls="--", lw=1, label="static max")
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
    for o in cmp.outcomes.values():
        m = o.minutes
        style = {"lw": 1.6 if o.actual else 0.9, "alpha": 1.0 if o.actual else 0.8, "color": POLICY_COLOURS.get(o.policy)}
        axes[0].plot(m.index, m["latency_p95_ms"], label=o.label, **style)
        axes[1].plot(m.index, m["total_cpu"], **style)
        cost_per_min = cmp.prices.cost(m["total_cpu"] / 60.0, m["total_memory_mb"] / 1024.0 / 60.0)
        axes[2].plot(m.index, cost_per_min.cumsum(), **style)
    axes[0].axhline(cmp.latency_target_ms, color="tab:red", ls="--", lw=1, label="p95 target")
    axes[0].set_yscale("log")
    axes[0].set_ylabel("p95 ms (minute mean)")
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
