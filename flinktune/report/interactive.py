"""The HTML report's interactive Plotly figures: the same views as the PNGs, zoomable, with hover values.

Use :func:`figures` for ``(element id, title, plotly Figure)`` triples and :func:`plotly_js` for
the plotly.js bundle to inline once per page (the report must open offline: nothing is fetched).
Every time axis carries the same marks as the PNGs (:data:`flinktune.report.plots.MARKS`).
"""

from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go
from plotly.offline import get_plotlyjs
from plotly.subplots import make_subplots

from flinktune.report.period import Events, ReportInputs
from flinktune.report.plots import (
    MARKS,
    POLICY_COLOURS,
    SERIES_COLOURS,
    STATIC_DASH,
    TUNING_START,
    drawing_order,
    planned_against_peak,
    within,
)

__all__ = ["figure_div", "figures", "plotly_js"]


def plotly_js() -> str:
    """The plotly.js bundle shipped with the plotly package (a few MB), for one inline ``<script>``."""
    return get_plotlyjs()


def figure_div(fig: go.Figure, div_id: str) -> str:
    """One figure as a ``<div>`` plus its script, without plotly.js (inlined once by the page)."""
    return fig.to_html(full_html=False, include_plotlyjs=False, div_id=div_id, config={"displaylogo": False, "responsive": True})


def _mark(fig: go.Figure, ev: Events, rows: int) -> None:
    # One legend entry per kind (an empty trace), then a vertical line per event in every row.
    for kind, (colour, dash, label) in MARKS.items():
        times = getattr(ev, kind)
        if not times:
            continue
        fig.add_trace(
            go.Scatter(x=[None], y=[None], mode="lines", line={"color": colour, "dash": dash}, name=label), row=1, col=1
        )
        for t in times:
            for r in range(1, rows + 1):
                fig.add_vline(x=t, line={"color": colour, "dash": dash, "width": 1}, opacity=0.7, row=r, col=1)
    if ev.tuning_start is not None:
        colour, dash, label = TUNING_START
        fig.add_trace(
            go.Scatter(x=[None], y=[None], mode="lines", line={"color": colour, "dash": dash, "width": 2}, name=label),
            row=1,
            col=1,
        )
        for r in range(1, rows + 1):
            fig.add_vline(x=ev.tuning_start, line={"color": colour, "dash": dash, "width": 2}, row=r, col=1)


def _layout(fig: go.Figure, title: str, height: int) -> go.Figure:
    fig.update_layout(
        title=title,
        height=height,
        margin={"l": 60, "r": 20, "t": 50, "b": 40},
        hovermode="x unified",
        legend={"orientation": "h", "y": -0.12},
        template="plotly_white",
    )
    return fig


def _rate(inputs: ReportInputs, ev: Events) -> go.Figure:
    f = inputs.features
    fig = make_subplots(rows=1, cols=1)
    fig.add_trace(
        go.Scatter(
            x=f["window_start"], y=f["input_rate"], name="input rate", line={"color": SERIES_COLOURS["input rate"], "width": 1.5}
        )
    )
    fig.add_trace(
        go.Scatter(
            x=f["window_start"],
            y=f["throughput"],
            name="throughput",
            line={"color": SERIES_COLOURS["throughput"], "width": 1.2, "dash": "dash"},
        )
    )
    pk = planned_against_peak(inputs)
    if len(pk):
        h = pd.Timedelta(seconds=inputs.forecast_horizon_s)
        xs, ys = [], []
        for r in pk.itertuples(index=False):
            xs += [r.ts, r.ts + h, None]
            ys += [r.planned, r.planned, None]
        fig.add_trace(
            go.Scatter(x=xs, y=ys, name="planned rate", mode="lines", line={"color": SERIES_COLOURS["planned rate"], "width": 3})
        )
        fig.add_trace(
            go.Scatter(
                x=pk["ts"] + h / 2,
                y=pk["peak"],
                name="peak that came",
                mode="markers",
                marker={"color": SERIES_COLOURS["peak that came"], "symbol": "triangle-up", "size": 9},
            )
        )
    _mark(fig, ev, 1)
    fig.update_yaxes(title_text="records / s")
    return _layout(fig, "Input rate, throughput, and the planned rate against the peak that came", 430)


def _same_load(inputs: ReportInputs, ev: Events) -> go.Figure:
    cmp = inputs.comparison
    assert cmp is not None
    fig = make_subplots(
        rows=3,
        cols=1,
        shared_xaxes=True,
        vertical_spacing=0.05,
        subplot_titles=("p95 latency (each minute's)", "reserved CPU cores", f"running cost, {cmp.prices.currency}"),
    )
    ev = within(ev, ev.tuning_start)
    for o in drawing_order(cmp.outcomes.values()):
        m = o.minutes
        static = o.policy == "static"
        line = {
            "width": 2.5 if o.actual or static else 1.2,
            "color": POLICY_COLOURS.get(o.policy),
            "dash": STATIC_DASH if static else "solid",
        }
        cost = cmp.prices.cost(m["total_cpu"] / 60.0, m["total_memory_mb"] / 1024.0 / 60.0).cumsum()
        for row, y in ((1, m["latency_p95_max_ms"]), (2, m["total_cpu"]), (3, cost)):
            fig.add_trace(
                go.Scatter(x=m.index, y=y, name=o.label, legendgroup=o.policy, showlegend=row == 1, line=line), row=row, col=1
            )
    fig.add_hline(y=cmp.latency_target_ms, line={"color": SERIES_COLOURS["p95 target"], "dash": "dash"}, row=1, col=1)
    fig.update_yaxes(type="log", title_text="ms", row=1, col=1)
    _mark(fig, ev, 3)
    return _layout(fig, "The same load under each policy", 760)


def _config(inputs: ReportInputs, ev: Events) -> go.Figure:
    f = inputs.features
    fig = make_subplots(
        rows=2,
        cols=1,
        shared_xaxes=True,
        vertical_spacing=0.08,
        subplot_titles=("parallelism and TaskManagers", "reserved cores and GiB"),
    )
    for name, y in (("parallelism", f["parallelism"]), ("TaskManagers", f["taskmanagers"])):
        fig.add_trace(
            go.Scatter(x=f["window_start"], y=y, name=name, line={"shape": "hv", "color": SERIES_COLOURS[name]}), row=1, col=1
        )
    for name, y in (
        ("reserved cores", f["taskmanagers"] * f["cpu"]),
        ("reserved GiB", f["taskmanagers"] * f["memory_mb"] / 1024.0),
        ("used cores", f["cpu_used"]),
    ):
        fig.add_trace(
            go.Scatter(
                x=f["window_start"],
                y=y,
                name=name,
                line={"shape": "hv" if "reserved" in name else "linear", "color": SERIES_COLOURS[name]},
            ),
            row=2,
            col=1,
        )
    _mark(fig, ev, 2)
    return _layout(fig, "Configuration and resources of this run", 560)


def _latency(inputs: ReportInputs, ev: Events) -> go.Figure:
    f = inputs.features
    fig = make_subplots(rows=1, cols=1)
    for name, col in (("p50", "latency_p50_ms"), ("p95", "latency_p95_ms")):
        fig.add_trace(go.Scatter(x=f["window_start"], y=f[col], name=name, line={"color": SERIES_COLOURS[name]}))
    fig.add_hline(y=inputs.latency_target_ms, line={"color": SERIES_COLOURS["p95 target"], "dash": "dash"})
    fig.update_yaxes(type="log", title_text="ms")
    _mark(fig, ev, 1)
    return _layout(fig, f"End-to-end latency of this run (dashed: the {inputs.latency_target_ms:,.0f} ms p95 target)", 400)


def figures(inputs: ReportInputs, ev: Events) -> list[tuple[str, str, go.Figure]]:
    """``(element id, title, figure)`` in reading order; the same-load view only with a comparison."""
    out = [
        ("plot-rate", "Load and forecast", _rate(inputs, ev)),
        ("plot-latency", "Latency", _latency(inputs, ev)),
        ("plot-config", "Configuration", _config(inputs, ev)),
    ]
    if inputs.comparison is not None:
        out.insert(0, ("plot-same-load", "The same load under each policy", _same_load(inputs, ev)))
    return out
