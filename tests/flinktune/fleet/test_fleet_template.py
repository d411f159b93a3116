"""The fleet file ``flinktune fleet init`` writes: every setting documented, loadable as written, and in docs/fleet.md."""

from pathlib import Path

import yaml

from flinktune.fleet import JobSettings, load_fleet_file
from flinktune.fleet.template import fleet_template

REPO = Path(__file__).resolve().parents[3]


def test_the_template_documents_every_setting_and_loads_as_two_managed_jobs(tmp_path):
    text = fleet_template()
    for field in JobSettings.model_fields:
        assert f"#   {field}: " in text, f"{field} is not documented in the template"
    path = tmp_path / "fleet.yaml"
    path.write_text(text)
    fleet = load_fleet_file(path)
    assert not fleet.held() and [s.name for s in fleet.managed()] == ["checkout", "clickstream"]
    checkout = fleet.get("checkout").settings
    assert checkout is not None and (checkout.latency_target_ms, checkout.dry_run, checkout.kind) == (800.0, True, "ysb")
    assert set(yaml.safe_load(text)) == {"defaults", "jobs"}


def test_docs_fleet_md_names_every_setting_and_the_commands():
    doc = (REPO / "docs" / "fleet.md").read_text()
    for field in JobSettings.model_fields:
        assert f"`{field}`" in doc, f"docs/fleet.md does not describe {field}"
    for command in ("flinktune fleet init", "flinktune fleet validate", "flinktune fleet list"):
        assert command in doc
