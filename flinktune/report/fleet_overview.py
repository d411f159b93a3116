"""The fleet overview page: one row per job (kind, load, verdict, CPU and money against static on the same
load, changes) linking to that job's report.

Use :func:`write_fleet_overview` once every job's report is written (``flinktune demo --jobs N``):
it reads each report's ``summary.json`` (the numbers its page shows) and writes ``overview.md``,
``overview.html`` and ``overview.json`` under ``<out_root>/fleet-<UTC timestamp>/``, with links
relative to that folder so the reports folder can move. :func:`fleet_rows` gives the rows alone.
"""

from __future__ import annotations

import html
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from flinktune.pricing import PriceList

__all__ = ["FleetJob", "fleet_rows", "write_fleet_overview"]

_HEADS = ("job", "kind", "load", "verdict", "CPU core-hours vs static", "cost vs static", "changes", "report")


@dataclass(frozen=True)
class FleetJob:
    """One job of the overview: its name, workload kind, load (share of the kind's rates) and report (``report.md``)."""

    job: str
    kind: str
    load: float
    report: Path


def _ratio(mine: float, theirs: float) -> str:
    return f"{mine / theirs:.2f} x" if theirs else "n/a"


def _row(job: FleetJob, out_dir: Path) -> dict[str, Any]:
    folder = job.report.parent
    try:
        summary = json.loads((folder / "summary.json").read_text())
    except (OSError, ValueError) as exc:
        raise ValueError(f"fleet overview: job {job.job}: cannot read {folder / 'summary.json'} ({exc})") from None
    row: dict[str, Any] = {
        "job": job.job,
        "kind": job.kind,
        "load": f"{job.load:g} x",
        "verdict": summary["verdict"]["headline"],
        "met": bool(summary["verdict"]["met"]),
        "link": os.path.relpath(folder / "report.html", out_dir),
    }
    same = summary.get("same_load")
    if same and "static" in same:
        # The same figures as the page's table of the same load: this run against static on it.
        prices = PriceList(**summary["prices"])
        mine, static = same[summary.get("same_load_policy", "flinktune")], same["static"]
        row["cpu"] = (
            f"{mine['cpu_core_hours']:.1f} vs {static['cpu_core_hours']:.1f} "
            f"({_ratio(mine['cpu_core_hours'], static['cpu_core_hours'])})"
        )
        row["cost"] = (
            f"{prices.money(mine['priced_cost'])} vs {prices.money(static['priced_cost'])} "
            f"({_ratio(mine['priced_cost'], static['priced_cost'])})"
        )
        row["changes"] = f"{mine['reconfigurations']:.0f}"
    else:  # a real cluster's report has no replay of static: its reservation against static's, no money
        tuned = summary.get("tuned") or summary
        row["cpu"] = f"{tuned['cpu_vs_static']:.2f} x static's reservation"
        row["cost"] = "no replay of static"
        row["changes"] = f"{tuned['reconfigurations']:.0f}"
    return row


def fleet_rows(jobs: list[FleetJob], out_dir: Path) -> list[dict[str, Any]]:
    """One dict per job, in ``jobs`` order; ``link`` is its ``report.html`` relative to ``out_dir``."""
    return [_row(job, out_dir) for job in jobs]


def _cells(row: dict[str, Any]) -> list[str]:
    return [row["job"], row["kind"], row["load"], row["verdict"], row["cpu"], row["cost"], row["changes"]]


def _markdown(rows: list[dict[str, Any]], title: str) -> str:
    lines = [f"# {title}", "", f"| {' | '.join(_HEADS)} |", f"|{'---|' * len(_HEADS)}"]
    for row in rows:
        cells = [c.replace("|", "\\|") for c in _cells(row)]
        lines.append(f"| {' | '.join(cells)} | [report]({row['link']}) |")
    return "\n".join(lines) + "\n"


def _html(rows: list[dict[str, Any]], title: str) -> str:
    e = html.escape
    head = "".join(f"<th>{e(h)}</th>" for h in _HEADS)
    body = []
    for row in rows:
        cells = [f'<td><a href="{e(row["link"])}">{e(row["job"])}</a></td>']
        cells += [f"<td>{e(c)}</td>" for c in _cells(row)[1:]]
        cells[3] = f'<td class="{"met" if row["met"] else "missed"}">{e(row["verdict"])}</td>'
        cells.append(f'<td><a href="{e(row["link"])}">report</a></td>')
        body.append(f"<tr>{''.join(cells)}</tr>")
    style = (
        "body{font-family:sans-serif;margin:2em}table{border-collapse:collapse}"
        "th,td{border:1px solid #ccc;padding:4px 8px;text-align:left;vertical-align:top}"
        "td.met{color:#11691b}td.missed{color:#a3120d}"
    )
    return (
        f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"><title>{e(title)}</title><style>{style}</style></head>\n'
        f"<body><h1>{e(title)}</h1>\n<p>Each job against static on the same load, as its report judges it; "
        f"the job's name opens its report.</p>\n<table><thead><tr>{head}</tr></thead>\n<tbody>\n"
        + "\n".join(body)
        + "\n</tbody></table></body></html>\n"
    )


def write_fleet_overview(
    jobs: list[FleetJob], out_root: Path, *, title: str = "Fleet overview", now: pd.Timestamp | None = None
) -> Path:
    """Write the overview of ``jobs`` under ``<out_root>/fleet-<stamp of now>/``; returns ``overview.html``'s path."""
    if not jobs:
        raise ValueError("fleet overview: no job to show")
    stamp = (now if now is not None else pd.Timestamp.now(tz="UTC")).strftime("%Y%m%dT%H%M%S")
    out_dir = Path(out_root) / f"fleet-{stamp}"
    rows = fleet_rows(jobs, out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "overview.md").write_text(_markdown(rows, title))
    (out_dir / "overview.json").write_text(json.dumps(rows, indent=2))
    (out_dir / "overview.html").write_text(_html(rows, title))
    return out_dir / "overview.html"
