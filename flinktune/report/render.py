"""Render a report's content with its Jinja2 templates: ``report.md.j2`` and ``report.html.j2``.

Use :func:`render_markdown` and :func:`render_html` on :func:`flinktune.report.content.report_content`.
HTML is autoescaped (reasons and job names come from the database); the Markdown escapes table
pipes. The HTML inlines plotly.js so it opens offline.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from jinja2 import Environment, PackageLoader, StrictUndefined, select_autoescape

__all__ = ["render_html", "render_markdown"]


def _cell(value: object) -> str:
    return str(value).replace("|", "/").replace("\n", " ")


@lru_cache(maxsize=1)
def _env() -> Environment:
    env = Environment(
        loader=PackageLoader("flinktune.report", "templates"),
        autoescape=select_autoescape(enabled_extensions=("html.j2",)),
        undefined=StrictUndefined,
        trim_blocks=False,
        lstrip_blocks=False,
        keep_trailing_newline=True,
    )
    env.filters["cell"] = _cell
    return env


def render_markdown(content: dict[str, Any]) -> str:
    """The Markdown report (plots as the PNG files beside it)."""
    return _env().get_template("report.md.j2").render(**content)


def render_html(content: dict[str, Any], plots: list[dict[str, str]], plotly_js: str) -> str:
    """The HTML report; ``plots``: ``{"id", "title", "div"}`` from :mod:`flinktune.report.interactive`."""
    return _env().get_template("report.html.j2").render(**content, plots=plots, plotly_js=plotly_js)
