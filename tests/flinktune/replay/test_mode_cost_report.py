"""The replay report's "reconfiguration cost by mode" section and its closing note."""

import json

import pytest

from flinktune.replay import cli_replay


def test_report_has_cost_by_mode_section_and_note_and_priced_costs(tmp_path, monkeypatch):
    monkeypatch.setenv("FLINKTUNE_PRICE_CPU_CORE_HOUR", "0.05")
    monkeypatch.setenv("FLINKTUNE_PRICE_MEMORY_GIB_HOUR", "0.01")
    cli_replay("ysb", "static,oracle", hours=1.0, failures="none", seed=3, out_dir=tmp_path, workers=1, plots=False)
    md = (tmp_path / "replay-ysb.md").read_text()
    assert "## Reconfiguration cost by mode" in md and "| static | 0 |" in md
    oracle = next(
        line for line in md.splitlines() if line.startswith("| oracle |") and "live" not in line and line.count("|") == 9
    )
    cells = [c.strip() for c in oracle.strip("|").split("|")]
    assert int(cells[1]) >= 1 and float(cells[6]) == 0  # oracle changed something; live migration: no downtime
    assert float(cells[2]) > 0 and float(cells[7]) < float(cells[3])  # ... and a smaller worst bump than redeploy
    note = next(line for line in md.splitlines() if line.startswith("Reconfiguration cost by mode:"))
    assert "live state migration 0 s" in note
    doc = json.loads((tmp_path / "replay-ysb.json").read_text())
    assert doc["reconfiguration_cost_by_mode"]["oracle"]["migrate_downtime_s"] == 0
    # the priced cost: core-hours and GiB-hours at the price list from the environment;
    # static: 24 cores and 96 GiB for one hour at the prices set above
    assert doc["priced_cost"]["static"] == pytest.approx(24 * 0.05 + 96 * 0.01)
    oracle = doc["absolute"]["oracle"]
    assert doc["priced_cost"]["oracle"] == pytest.approx(oracle["cpu_core_hours"] * 0.05 + oracle["memory_gib_hours"] * 0.01)
    assert doc["relative"]["oracle"]["priced_cost"] == pytest.approx(doc["priced_cost"]["oracle"] / doc["priced_cost"]["static"])
    header = next(line for line in md.splitlines() if line.startswith("| policy | CPU"))
    assert header.rstrip(" |").endswith("priced cost") and "static costs USD 2.16" in md
