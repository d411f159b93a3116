"""The run report: Markdown plus PNG plots of one job's tuned period.

Inputs are the validated curated features (``features_1m``), the stored decisions and the stored
forecasts. Plots: input rate against the forecasts the policy planned with, the configuration
over time, latency against the target, reserved and used resources. The Markdown holds a summary
table relative to running the static maximum for the same period and every decision with its
reason. Written to a fresh folder and renamed into place, so a half-written report never appears.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # no display on servers and CI
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402

from flinktune.config_space import ConfigSpace  # noqa: E402

__all__ = ["ReportInputs", "write_report", "summarise"]


@dataclass(frozen=True)
class ReportInputs:
    """Everything a report shows. ``features``: curated features_1m rows of one job."""

    job: str
    features: pd.DataFrame
    decisions: pd.DataFrame
    forecasts: pd.DataFrame
    latency_target_ms: float
    space: ConfigSpace
    since: pd.Timestamp | None = None


def summarise(inputs: ReportInputs, features: pd.DataFrame | None = None) -> dict[str, float]:
    """Headline figures of a period (default: all features), resources relative to the static maximum."""
    f = inputs.features if features is None else features
    hours = len(f) / 60.0
    mx = inputs.space.maximum
    reserved_cpu_h = float((f["taskmanagers"] * f["cpu"]).sum() / 60.0)
    reserved_mem_gib_h = float((f["taskmanagers"] * f["memory_mb"]).sum() / 60.0 / 1024.0)
    changes = inputs.decisions[inputs.decisions["changed"] == 1] if len(inputs.decisions) else inputs.decisions
    if len(changes) and len(f):
        t0, t1 = f["window_start"].min().timestamp(), f["window_start"].max().timestamp() + 60
        changes = changes[(changes["ts"] >= t0) & (changes["ts"] <= t1)]
    return {
        "hours": hours,
        "cpu_core_hours": reserved_cpu_h,
        "cpu_vs_static": reserved_cpu_h / (mx.total_cpu * hours) if hours else float("nan"),
        "memory_gib_hours": reserved_mem_gib_h,
        "memory_vs_static": reserved_mem_gib_h / (mx.total_memory_mb / 1024.0 * hours) if hours else float("nan"),
        "latency_p50_ms": float(f["latency_p50_ms"].median()),
        "latency_p95_ms": float(f["latency_p95_ms"].quantile(0.95)),
        "minutes_over_target": int((f["latency_p95_ms"] > inputs.latency_target_ms).sum()),
        "mean_lag": float(f["lag"].mean()),
        "reconfigurations": int(len(changes)),
        "downtime_s": float(changes["downtime_s"].sum()) if len(changes) else 0.0,
        "profiling_rounds": int((inputs.decisions["action"] == "profile").sum()) if len(inputs.decisions) else 0,
    }


def _plot_rate(inputs: ReportInputs, path: Path) -> None:
    f = inputs.features
    fig, ax = plt.subplots(figsize=(11, 3.8))
    ax.plot(f["window_start"], f["input_rate"], lw=1, label="input rate (1 min mean)")
    ax.plot(f["window_start"], f["throughput"], lw=0.8, alpha=0.7, label="throughput")
    for i, row in enumerate(inputs.forecasts.itertuples(index=False)):
        bins = pd.DataFrame(json.loads(row.bins))
        t = pd.to_datetime(bins["bin_start"], unit="ms", utc=True)
        ax.plot(t, bins["mean"], color="tab:red", lw=1.2, label="forecast mean" if i == 0 else None)
        lo, hi = ("q0.1", "q0.9") if {"q0.1", "q0.9"} <= set(bins.columns) else ("q0.5", "q0.99")
        if {lo, hi} <= set(bins.columns):
            ax.fill_between(t, bins[lo], bins[hi], color="tab:red", alpha=0.15, label=f"forecast {lo}-{hi}" if i == 0 else None)
    ax.set_ylabel("records / s")
    ax.set_title(f"{inputs.job}: input rate and forecasts")
    ax.legend(loc="upper left", fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _plot_config(inputs: ReportInputs, path: Path) -> None:
    f = inputs.features
    fig, axes = plt.subplots(3, 1, figsize=(11, 6), sharex=True)
    axes[0].step(f["window_start"], f["parallelism"], where="post", label="parallelism")
    axes[0].step(f["window_start"], f["taskmanagers"], where="post", label="TaskManagers")
    axes[0].legend(fontsize=8)
    axes[1].step(f["window_start"], f["cpu"], where="post", label="CPU per TM")
    axes[1].step(f["window_start"], f["task_slots"], where="post", label="slots per TM")
    axes[1].step(f["window_start"], f["memory_mb"] / 1024.0, where="post", label="GiB per TM")
    axes[1].legend(fontsize=8)
    axes[2].step(f["window_start"], f["checkpoint_interval_s"], where="post", label="checkpoint interval (s)")
    axes[2].set_ylim(0, max(100, float(f["checkpoint_interval_s"].max()) + 10))
    axes[2].legend(fontsize=8)
    changes = inputs.decisions[inputs.decisions["changed"] == 1] if len(inputs.decisions) else inputs.decisions
    for ts in changes.get("ts", []):
        for ax in axes:
            ax.axvline(pd.to_datetime(ts, unit="s", utc=True), color="grey", ls=":", lw=0.8)
    axes[0].set_title(f"{inputs.job}: configuration over time (dotted: reconfigurations)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _plot_latency(inputs: ReportInputs, path: Path) -> None:
    f = inputs.features
    fig, ax = plt.subplots(figsize=(11, 3.5))
    ax.plot(f["window_start"], f["latency_p50_ms"], lw=0.8, label="p50")
    ax.plot(f["window_start"], f["latency_p95_ms"], lw=0.8, label="p95")
    ax.axhline(inputs.latency_target_ms, color="tab:red", ls="--", lw=1, label="p95 target")
    ax.set_yscale("log")
    ax.set_ylabel("ms")
    ax.set_title(f"{inputs.job}: end-to-end latency")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _plot_resources(inputs: ReportInputs, path: Path) -> None:
    f = inputs.features
    fig, axes = plt.subplots(2, 1, figsize=(11, 5), sharex=True)
    axes[0].step(f["window_start"], f["taskmanagers"] * f["cpu"], where="post", label="reserved cores")
    axes[0].plot(f["window_start"], f["cpu_used"], lw=0.8, label="used cores")
    axes[0].axhline(inputs.space.maximum.total_cpu, color="grey", ls="--", lw=1, label="static max")
    axes[0].legend(fontsize=8)
    axes[1].step(f["window_start"], f["taskmanagers"] * f["memory_mb"] / 1024.0, where="post", label="reserved GiB")
    axes[1].plot(f["window_start"], f["memory_used_mb"] / 1024.0, lw=0.8, label="heap used GiB")
    axes[1].axhline(inputs.space.maximum.total_memory_mb / 1024.0, color="grey", ls="--", lw=1, label="static max")
    axes[1].legend(fontsize=8)
    axes[0].set_title(f"{inputs.job}: resources")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _tuned_start(inputs: ReportInputs) -> pd.Timestamp | None:
    """Start of the period the tuner was in charge: one decision interval before its first decision."""
    d = inputs.decisions
    if not len(d):
        return None
    first = pd.to_datetime(float(d["ts"].min()), unit="s", utc=True)
    gaps = d["ts"].diff().dropna()
    interval = float(gaps.median()) if len(gaps) else 600.0
    return first - pd.Timedelta(seconds=interval)


def _markdown(inputs: ReportInputs, summary: dict[str, float]) -> str:
    f = inputs.features
    start = _tuned_start(inputs)
    periods = [("whole period", summary)]
    if start is not None and (f["window_start"] < start).any() and (f["window_start"] >= start).any():
        periods = [
            ("before tuning", summarise(inputs, f[f["window_start"] < start])),
            ("tuned", summarise(inputs, f[f["window_start"] >= start])),
        ]
    head = "| measure | " + " | ".join(name for name, _ in periods) + " |"
    rows = [
        ("hours", lambda s: f"{s['hours']:.1f}"),
        ("reserved CPU core-hours", lambda s: f"{s['cpu_core_hours']:.1f} ({s['cpu_vs_static']:.2f} x static max)"),
        ("reserved memory GiB-hours", lambda s: f"{s['memory_gib_hours']:.1f} ({s['memory_vs_static']:.2f} x static max)"),
        ("latency p50 (median of minutes)", lambda s: f"{s['latency_p50_ms']:.0f} ms"),
        ("latency p95 (95th pct of minutes)", lambda s: f"{s['latency_p95_ms']:.0f} ms"),
        ("minutes with p95 over target", lambda s: f"{s['minutes_over_target']}"),
        ("mean consumer lag", lambda s: f"{s['mean_lag']:,.0f} records"),
        ("reconfigurations", lambda s: f"{s['reconfigurations']} ({s['downtime_s']:.0f} s downtime)"),
    ]
    table = [head, "|---|" + "---|" * len(periods)]
    table += ["| " + label + " | " + " | ".join(fmt(s) for _, s in periods) + " |" for label, fmt in rows]
    lines = [
        f"# flinktune report: {inputs.job}",
        "",
        f"Period: {f['window_start'].min()} to {f['window_start'].max()} ({summary['hours']:.1f} h of per-minute features).",
        f"Latency target (p95): {inputs.latency_target_ms:.0f} ms. Reference: static maximum {inputs.space.maximum.describe()}.",
        f"Profiling rounds: {summary['profiling_rounds']}.",
        "",
        "## Summary",
        "",
        *table,
        "",
        "![rate and forecast](rate_forecast.png)",
        "",
        "![configuration](configuration.png)",
        "",
        "![latency](latency.png)",
        "",
        "![resources](resources.png)",
        "",
        "## Decisions",
        "",
        "| time (UTC) | policy | action | applied | reason |",
        "|---|---|---|---|---|",
    ]
    for row in inputs.decisions.itertuples(index=False):
        t = pd.to_datetime(row.ts, unit="s", utc=True).strftime("%Y-%m-%d %H:%M")
        applied = f"{row.mode}, {row.downtime_s:.0f} s" if int(row.changed) else ("dry run" if int(row.dry_run) else "-")
        reason = str(row.reason).replace("|", "/")
        lines.append(f"| {t} | {row.policy} | {row.action} | {applied} | {reason} |")
    return "\n".join(lines) + "\n"


def write_report(inputs: ReportInputs, out_root: Path) -> Path:
    """Write ``<out_root>/<job>-<UTC timestamp>/report.md`` with its plots; returns the report path."""
    if inputs.features.empty:
        raise ValueError(f"report for {inputs.job!r}: no curated features in the period; run the ETL first")
    f = inputs.features.sort_values("window_start").reset_index(drop=True)
    if inputs.since is not None:
        f = f[f["window_start"] >= inputs.since].reset_index(drop=True)
    inputs = ReportInputs(inputs.job, f, inputs.decisions, inputs.forecasts, inputs.latency_target_ms, inputs.space)
    summary = summarise(inputs)
    out_root.mkdir(parents=True, exist_ok=True)
    stamp = pd.Timestamp.now(tz="UTC").strftime("%Y%m%dT%H%M%S")
    final = out_root / f"{inputs.job}-{stamp}"
    tmp = Path(tempfile.mkdtemp(prefix=f".{inputs.job}-", dir=out_root))
    try:
        _plot_rate(inputs, tmp / "rate_forecast.png")
        _plot_config(inputs, tmp / "configuration.png")
        _plot_latency(inputs, tmp / "latency.png")
        _plot_resources(inputs, tmp / "resources.png")
        start = _tuned_start(inputs)
        tuned = inputs.features[inputs.features["window_start"] >= start] if start is not None else inputs.features.iloc[:0]
        full = dict(summary, tuned=summarise(inputs, tuned) if len(tuned) else None)
        (tmp / "summary.json").write_text(json.dumps(full, indent=2))
        (tmp / "report.md").write_text(_markdown(inputs, summary))
        if final.exists():
            shutil.rmtree(final)
        os.replace(tmp, final)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return final / "report.md"
