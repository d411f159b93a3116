"""What one report covers: its inputs, the headline figures of a period, and the events on its time axis.

Use :class:`ReportInputs` to hand a report everything it shows, :func:`summarise` for the
figures of a period of curated features (resources relative to the static maximum, latency,
changes), :func:`tuned_start` for where the tuner took over and :func:`events` for the moments
every time axis marks (failures, reconfigurations, profiling, tuning start).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pandas as pd

from flinktune.config_space import ConfigSpace
from flinktune.pricing import PriceList, load_prices
from flinktune.report.counterfactual import Comparison
from flinktune.report.latency import minutes_p95
from flinktune.report.quality import DataQuality

__all__ = ["Events", "ReportInputs", "events", "summarise", "tuned_start"]


@dataclass(frozen=True)
class ReportInputs:
    """Everything a report shows.

    ``features``: curated ``features_1m`` rows of one job; ``decisions`` / ``forecasts``: the state
    store's tables; ``comparison``: the run beside the counterfactuals on the same load (None on a
    real cluster, with ``comparison_note`` saying why); ``prices``: the price list (default: from
    the environment); ``forecast_horizon_s``: how far each planned rate looked ahead;
    ``data_quality``: the job's validated batches (None: the report has no data-quality section);
    ``tracking_note``: why the report is not logged to MLflow (empty: it is, or nobody asked)."""

    job: str
    features: pd.DataFrame
    decisions: pd.DataFrame
    forecasts: pd.DataFrame
    latency_target_ms: float
    space: ConfigSpace
    since: pd.Timestamp | None = None
    comparison: Comparison | None = None
    comparison_note: str = ""
    prices: PriceList = field(default_factory=load_prices)
    policy: str = "flinktune"
    forecast_horizon_s: int = 600
    data_quality: DataQuality | None = None
    tracking_note: str = ""


def summarise(inputs: ReportInputs, features: pd.DataFrame | None = None) -> dict[str, float]:
    """Headline figures of a period (default: all features), resources relative to the static maximum."""
    f = inputs.features if features is None else features
    hours = len(f) / 60.0
    mx = inputs.space.maximum
    reserved_cpu_h = float((f["taskmanagers"] * f["cpu"]).sum() / 60.0)
    reserved_mem_gib_h = float((f["taskmanagers"] * f["memory_mb"]).sum() / 60.0 / 1024.0)
    changes = inputs.decisions[inputs.decisions["changed"] == 1] if len(inputs.decisions) else inputs.decisions
    profiles = inputs.decisions[inputs.decisions["action"] == "profile"] if len(inputs.decisions) else inputs.decisions
    if len(f):
        t0, t1 = f["window_start"].min().timestamp(), f["window_start"].max().timestamp() + 60
        if len(changes):
            changes = changes[(changes["ts"] >= t0) & (changes["ts"] <= t1)]
        if len(profiles):
            profiles = profiles[(profiles["ts"] >= t0) & (profiles["ts"] <= t1)]
    return {
        "hours": hours,
        "cpu_core_hours": reserved_cpu_h,
        "cpu_vs_static": reserved_cpu_h / (mx.total_cpu * hours) if hours else float("nan"),
        "memory_gib_hours": reserved_mem_gib_h,
        "memory_vs_static": reserved_mem_gib_h / (mx.total_memory_mb / 1024.0 * hours) if hours else float("nan"),
        "priced_cost": inputs.prices.cost(reserved_cpu_h, reserved_mem_gib_h),
        "latency_p50_ms": float(f["latency_p50_ms"].median()),
        "latency_p95_ms": minutes_p95(f["latency_p95_ms"]),
        "minutes_over_target": int((f["latency_p95_ms"] > inputs.latency_target_ms).sum()),
        "mean_lag": float(f["lag"].mean()),
        "reconfigurations": len(changes),
        "downtime_s": float(changes["downtime_s"].sum()) if len(changes) else 0.0,
        "profiling_rounds": len(profiles),
    }


def tuned_start(inputs: ReportInputs) -> pd.Timestamp | None:
    """Start of the period the tuner was in charge: one decision interval before its first decision."""
    d = inputs.decisions
    if not len(d):
        return None
    first = pd.to_datetime(float(d["ts"].min()), unit="s", utc=True)
    gaps = d["ts"].diff().dropna()
    interval = float(gaps.median()) if len(gaps) else 600.0
    return first - pd.Timedelta(seconds=interval)


@dataclass(frozen=True)
class Events:
    """Moments every time axis marks (UTC timestamps)."""

    tuning_start: pd.Timestamp | None
    failures: list[pd.Timestamp]
    reconfigurations: list[pd.Timestamp]
    profiling: list[pd.Timestamp]


def events(inputs: ReportInputs) -> Events:
    """Failures (the twin's exact seconds when there is a comparison, else the minutes with a restart),
    reconfigurations carried out, profiling decisions and the tuning start."""
    f, d = inputs.features, inputs.decisions

    def at(rows: pd.DataFrame) -> list[pd.Timestamp]:
        return [pd.to_datetime(float(t), unit="s", utc=True) for t in rows["ts"]] if len(rows) else []

    restarted = f.loc[f["restarts"].fillna(0) > 0, "window_start"] if "restarts" in f.columns else pd.Series([], dtype=object)
    failures = list(restarted)
    start = tuned_start(inputs)
    if inputs.comparison is not None and start is not None:  # the twin's exact seconds in the compared period
        failures = [t for t in failures if t < start] + list(inputs.comparison.failures)
    return Events(
        tuning_start=start,
        failures=failures,
        reconfigurations=at(d[d["changed"] == 1]) if len(d) else [],
        profiling=at(d[d["action"] == "profile"]) if len(d) else [],
    )
