"""HTML for the plugin's pages: an index of jobs and one page per job (from :func:`.overview.job_overview`).

Use :func:`index_page` and :func:`job_page`; both return a complete, self-contained HTML document
(inline CSS, no scripts). Every value from the database is escaped.
"""

from __future__ import annotations

from datetime import UTC, datetime
from html import escape
from typing import Any
from urllib.parse import quote

__all__ = ["index_page", "job_page"]

_STYLE = """body{font-family:system-ui,sans-serif;margin:1.5rem;color:#222}table{border-collapse:collapse;margin:.5rem 0}
td,th{border:1px solid #ccc;padding:.25rem .5rem;text-align:left;vertical-align:top}th{background:#f3f3f3}
.note{color:#777}img{max-width:48%;margin:.25rem;border:1px solid #ddd}"""


def _doc(title: str, body: str) -> str:
    return (
        f'<!doctype html><html lang="en"><head><meta charset="utf-8"><title>{escape(title)}</title>'
        f"<style>{_STYLE}</style></head><body>{body}</body></html>"
    )


def _when(ts: float | None) -> str:
    return "-" if ts is None else datetime.fromtimestamp(ts, tz=UTC).strftime("%Y-%m-%d %H:%M UTC")


def index_page(
    jobs: list[str], *, base: str = "/flinktune/", note: str | None = None, modes: dict[str, str] | None = None
) -> str:
    """The list of jobs with recorded decisions, each linking to its page under ``base``, with its mode (advise or act)."""
    modes = modes or {}
    items = "".join(
        f'<li><a href="{escape(base)}job/{quote(j)}">{escape(j)}</a>'
        + (f' <span class="mode">({escape(modes[j])})</span>' if j in modes else "")
        + "</li>"
        for j in jobs
    )
    body = "<h1>flinktune</h1>" + (f'<p class="note">{escape(note)}</p>' if note else "")
    body += f"<ul>{items}</ul>" if jobs else '<p class="note">No job has recorded decisions yet.</p>'
    return _doc("flinktune jobs", body)


def _config_table(config: dict[str, Any] | None) -> str:
    if not config:
        return '<p class="note">No decision recorded yet, so the configuration in force is unknown.</p>'
    rows = "".join(f"<tr><th>{escape(str(k))}</th><td>{escape(str(v))}</td></tr>" for k, v in config.items())
    return f'<table id="config">{rows}</table>'


def _decisions_table(decisions: list[dict[str, Any]]) -> str:
    if not decisions:
        return '<p class="note">No decisions.</p>'
    head = "<tr><th>time</th><th>policy</th><th>action</th><th>applied</th><th>reason</th><th>target</th></tr>"
    rows = []
    for d in decisions:
        applied = d["mode"] if d["changed"] else ("advice only" if d["dry_run"] else "-")
        target = ", ".join(f"{k}={v}" for k, v in (d["target"] or {}).items())
        rows.append(
            f"<tr><td>{_when(d['ts'])}</td><td>{escape(d['policy'])}</td><td>{escape(d['action'])}</td>"
            f"<td>{escape(str(applied))}</td><td>{escape(d['reason'])}</td><td>{escape(target)}</td></tr>"
        )
    return f'<table id="decisions">{head}{"".join(rows)}</table>'


def _champions_list(champions: list[dict[str, Any]]) -> str:
    items = []
    for c in champions:
        if c["version"] is None:
            items.append(f'<li>{escape(c["kind"])}: {escape(c["model"])} <span class="note">({escape(c["note"])})</span></li>')
        else:
            items.append(
                f'<li>{escape(c["kind"])}: <a href="{escape(c["url"])}">{escape(c["model"])} '
                f"version {escape(c['version'])}</a></li>"
            )
    return f'<ul id="champions">{"".join(items)}</ul>'


def job_page(overview: dict[str, Any], *, base: str = "/flinktune/") -> str:
    """One job's page: configuration in force, last decisions with reasons, champions, report plots.

    ``base`` is where the plugin is mounted (links are absolute so any URL form works)."""
    job = overview["job"]
    parts = [
        f'<p><a href="{escape(base)}">all jobs</a></p><h1>{escape(job)}</h1>',
        f'<p id="mode"><strong>Mode:</strong> {escape(overview["mode"]["why"])}</p>',
        f'<h2>Configuration in force</h2><p class="note">as of {_when(overview["config_since"])}</p>',
        _config_table(overview["config"]),
        "<h2>Last decisions</h2>",
        _decisions_table(overview["decisions"]),
        "<h2>Champion models</h2>",
        _champions_list(overview["champions"]),
        "<h2>Latest report</h2>",
    ]
    report = overview["report"]
    if report is None:
        parts.append('<p class="note">No report yet (run flinktune_report).</p>')
    else:
        if report.get("verdict"):
            parts.append(f'<p id="report-verdict"><strong>Verdict:</strong> {escape(report["verdict"])}</p>')
        if report.get("html"):
            parts.append(
                f'<p><a id="report-link" href="{escape(base)}job/{quote(job)}/report">Open the full report (HTML, '
                "interactive plots)</a></p>"
            )
        parts.append(f'<p class="note">{escape(report["markdown"])} under FLINKTUNE_REPORTS_DIR</p>')
        parts += [
            f'<img src="{escape(base)}job/{quote(job)}/plots/{quote(name)}" alt="{escape(name)}">' for name in report["plots"]
        ]
    return _doc(f"flinktune: {job}", "".join(parts))
