"""Write one report folder: ``report.md`` and ``report.html`` with PNG plots and ``summary.json``.

Use :func:`write_report`. Everything is written to a fresh temporary folder and renamed into
place, so a half-written report never appears.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from dataclasses import replace
from pathlib import Path

import pandas as pd

from flinktune.report.content import report_content
from flinktune.report.interactive import figure_div, figures, plotly_js
from flinktune.report.period import ReportInputs, events, summarise, tuned_start
from flinktune.report.plots import write_plots
from flinktune.report.render import render_html, render_markdown
from flinktune.report.verdict import Goals

__all__ = ["write_report"]


def _summary(inputs: ReportInputs, content: dict) -> dict:
    start = tuned_start(inputs)
    tuned = inputs.features[inputs.features["window_start"] >= start] if start is not None else inputs.features.iloc[:0]
    out = dict(
        content["summary"],
        tuned=summarise(inputs, tuned) if len(tuned) else None,
        verdict=content["verdict_obj"].to_dict(),
        prices=inputs.prices.model_dump(),
    )
    dq = content["data_quality"]
    if dq is not None:
        out["data_quality"] = {k: dq[k] for k in ("validated", "passed", "quarantined", "with_warnings", "data_docs_index")}
    if inputs.comparison is not None:
        out["same_load"] = {k: o.measures for k, o in inputs.comparison.outcomes.items()}
        out["same_load_policy"] = inputs.comparison.actual
        spread, run = inputs.comparison.spread, inputs.comparison.actual
        if spread is not None:  # every seed's figures, and money per month (mean, min, max) against each policy
            months = {k: list(spread.per_month(run, k)) for k in spread.measures if k != run} if run in spread.measures else {}
            out["spread"] = {
                "seeds": list(spread.seeds),
                "replayed": spread.replayed,
                "hours": spread.hours,
                "measures": {k: list(v) for k, v in spread.measures.items()},
                "per_month": months,
            }
    return out


def write_report(inputs: ReportInputs, out_root: Path, goals: Goals | None = None) -> Path:
    """Write ``<out_root>/<job>-<UTC timestamp>/report.md`` (and ``report.html``); returns the Markdown's path."""
    if inputs.features.empty:
        raise ValueError(f"report for {inputs.job!r}: no curated features in the period; run the ETL first")
    f = inputs.features.sort_values("window_start").reset_index(drop=True)
    if inputs.since is not None:
        f = f[f["window_start"] >= inputs.since].reset_index(drop=True)
        if f.empty:
            raise ValueError(f"report for {inputs.job!r}: no curated features since {inputs.since}")
    inputs = replace(inputs, features=f, since=None)
    content = report_content(inputs, goals)
    ev = events(inputs)
    out_root.mkdir(parents=True, exist_ok=True)
    stamp = pd.Timestamp.now(tz="UTC").strftime("%Y%m%dT%H%M%S")
    final = out_root / f"{inputs.job}-{stamp}"
    tmp = Path(tempfile.mkdtemp(prefix=f".{inputs.job}-", dir=out_root))
    try:
        write_plots(inputs, ev, tmp)
        divs = [{"id": i, "title": t, "div": figure_div(fig, i)} for i, t, fig in figures(inputs, ev)]
        (tmp / "summary.json").write_text(json.dumps(_summary(inputs, content), indent=2, default=float))
        (tmp / "report.md").write_text(render_markdown(content))
        (tmp / "report.html").write_text(render_html(content, divs, plotly_js()))
        if final.exists():
            shutil.rmtree(final)
        os.replace(tmp, final)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return final / "report.md"
