"""Server paths in a served report: each folder named by its setting, nothing else touched."""

from __future__ import annotations

from flinktune.orchestration.plugin_ui.data_docs import hide_server_paths


def test_every_server_folder_is_named_by_its_setting_and_the_innermost_wins(tmp_path):
    var = tmp_path / "var"
    reports = var / "reports"
    html = (
        f'<a href="{(reports / "demo-1" / "plots" / "a.png").as_uri()}">plot</a> written to {reports}/demo-1/report.md; '
        f"lake {var / 'lake'}; the var folder is {var}; a word: var"
    )
    out = hide_server_paths(html, {"FLINKTUNE_VAR_DIR": var, "FLINKTUNE_REPORTS_DIR": reports})
    assert str(tmp_path) not in out
    assert 'href="FLINKTUNE_REPORTS_DIR/demo-1/plots/a.png"' in out and "FLINKTUNE_REPORTS_DIR/demo-1/report.md" in out
    assert "lake FLINKTUNE_VAR_DIR/lake" in out and out.endswith("a word: var")
