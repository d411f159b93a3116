"""The GX Data Docs site, served by the Airflow plugin instead of linked as ``file://``.

A browser refuses ``file://`` links from an ``http://`` page, so the report's Data Docs links
(:mod:`flinktune.report.quality` writes them as ``file://`` URLs, right for a report opened from
disk) are rewritten when the plugin serves the report. Use :func:`data_docs_root` for the site's
folder in a lake, :func:`data_docs_file` to resolve a requested path inside it (None for anything
outside it or missing: the route answers 404), :func:`served_links` to rewrite a report's links and
:func:`hide_server_paths` to name the server's folders by their setting instead of their path.
"""

from __future__ import annotations

from pathlib import Path, PurePosixPath

from flinktune.lake import Lake

__all__ = ["DATA_DOCS_ROUTE", "data_docs_file", "data_docs_root", "hide_server_paths", "served_links"]

#: Where the plugin serves the site, relative to its mount point (``/flinktune/``).
DATA_DOCS_ROUTE = "data-docs/"


def data_docs_root(lake_dir: str | Path) -> Path:
    """The Data Docs site folder of the lake at ``lake_dir`` (its ``index.html``'s folder; may not exist yet)."""
    return Lake(Path(lake_dir)).data_docs_index.parent


def data_docs_file(root: Path, requested: str) -> Path | None:
    """The file ``requested`` (a relative URL path, e.g. ``validations/x/y.html``) under ``root``, or None.

    None when the path is absolute, has a ``..`` or empty part, leaves ``root`` once links are
    resolved, or names no file: a read-only view serves the site and nothing beside it.
    """
    parts = PurePosixPath(requested).parts
    if not parts or requested.startswith("/") or "\\" in requested or any(p in ("..", ".", "") for p in parts):
        return None
    base = root.resolve()
    target = base.joinpath(*parts).resolve()
    if not target.is_relative_to(base) or not target.is_file():
        return None
    return target


def served_links(html: str, root: Path, base: str) -> str:
    """``html`` with every ``file://`` link into the site ``root`` pointing at the plugin's route under ``base``.

    ``base`` is the plugin's mount path with a trailing slash (``/flinktune/``). Links elsewhere stay as they are.
    """
    prefix = root.resolve().as_uri() + "/"
    return html.replace(prefix, base + DATA_DOCS_ROUTE)


def hide_server_paths(html: str, folders: dict[str, Path]) -> str:
    """``html`` with each of ``folders`` (``{label: path}``, e.g. ``{"FLINKTUNE_REPORTS_DIR": ...}``) written
    as its label: as a ``file://`` URL and as a plain path, longest first (a folder inside another one
    keeps its own label). A report written for reading from disk names its files; a viewer of the
    plugin is shown no path of the server."""
    pairs = []
    for label, folder in folders.items():
        resolved = Path(folder).resolve()
        pairs += [(resolved.as_uri(), label), (str(resolved), label)]  # absolute forms only: "var" is also a word
    for text, label in sorted(pairs, key=lambda p: len(p[0]), reverse=True):
        html = html.replace(text, label)
    return html
