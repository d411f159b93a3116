"""The plugin's Data Docs route: files inside the site only, report links rewritten from file:// to the route."""

from pathlib import Path

from flinktune.orchestration.plugin_ui.data_docs import data_docs_file, data_docs_root, served_links


def _site(tmp_path: Path) -> Path:
    root = data_docs_root(tmp_path / "lake")
    (root / "validations" / "b1").mkdir(parents=True)
    (root / "index.html").write_text("<h1>Data Docs</h1>")
    (root / "validations" / "b1" / "run.html").write_text("batch b1")
    (tmp_path / "lake" / "secret.txt").write_text("not the site")
    return root


def test_only_files_inside_the_site_are_found(tmp_path: Path) -> None:
    root = _site(tmp_path)
    assert data_docs_file(root, "index.html") == (root / "index.html").resolve()
    assert data_docs_file(root, "validations/b1/run.html") == (root / "validations" / "b1" / "run.html").resolve()
    escapes = ["../../secret.txt", "validations/../../../secret.txt", "/etc/passwd", "..\\..\\secret.txt", "", "validations"]
    assert [data_docs_file(root, p) for p in escapes] == [None] * len(escapes)
    (root / "link.txt").symlink_to(tmp_path / "lake" / "secret.txt")  # a link out of the site is refused too
    assert data_docs_file(root, "link.txt") is None
    assert data_docs_file(root, "missing.html") is None


def test_report_links_into_the_site_point_at_the_route(tmp_path: Path) -> None:
    root = _site(tmp_path)
    page = (root / "validations" / "b1" / "run.html").resolve().as_uri()
    other = (tmp_path / "lake" / "quarantine").resolve().as_uri()
    html = f'<a href="{root.resolve().as_uri()}/index.html">docs</a> <a href="{page}">b1</a> <a href="{other}">q</a>'
    out = served_links(html, root, "/flinktune/")
    assert '<a href="/flinktune/data-docs/index.html">' in out
    assert '<a href="/flinktune/data-docs/validations/b1/run.html">' in out
    assert f'<a href="{other}">' in out, "links outside the site stay as they are"
