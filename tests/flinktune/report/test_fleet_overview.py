"""The fleet overview: a row per job with the figures of its report's summary, and links that resolve to its page."""

import json

import pandas as pd

from flinktune.pricing import load_prices
from flinktune.report.fleet_overview import FleetJob, write_fleet_overview


def _report(root, job, summary):
    folder = root / f"{job}-20260101T000000"
    folder.mkdir(parents=True)
    (folder / "summary.json").write_text(json.dumps({"prices": load_prices().model_dump(), **summary}))
    (folder / "report.html").write_text("<html></html>")
    return folder / "report.md"


def _measures(cpu, cost, changes):
    return {"cpu_core_hours": cpu, "priced_cost": cost, "reconfigurations": changes}


def test_rows_repeat_each_report_and_link_to_it(tmp_path):
    reports = tmp_path / "reports"
    twin = _report(reports, "a-1-ysb", {
        "verdict": {"met": True, "headline": "flinktune met all 3 goals <on the same load>"},
        "same_load": {"flinktune": _measures(6.0, 1.5, 3), "static": _measures(12.0, 3.0, 0)}, "same_load_policy": "flinktune",
    })  # fmt: skip
    real = _report(reports, "b-2-tsw", {
        "verdict": {"met": False, "headline": "MISSED latency"},
        "tuned": {"cpu_vs_static": 0.75, "reconfigurations": 2},
    })  # fmt: skip
    page = write_fleet_overview([FleetJob("a-1-ysb", "ysb", 1.0, twin), FleetJob("b-2-tsw", "tsw", 0.6, real)], reports,
                                now=pd.Timestamp("2026-01-02T03:04:05Z"))  # fmt: skip
    assert page == reports / "fleet-20260102T030405" / "overview.html"
    rows = json.loads((page.parent / "overview.json").read_text())
    money = load_prices().money
    assert rows[0] | {"link": None} == {
        "job": "a-1-ysb", "kind": "ysb", "load": "1 x", "verdict": "flinktune met all 3 goals <on the same load>", "met": True,
        "cpu": "6.0 vs 12.0 (0.50 x)", "cost": f"{money(1.5)} vs {money(3.0)} (0.50 x)", "changes": "3", "link": None,
    }  # fmt: skip
    assert (rows[1]["cpu"], rows[1]["cost"], rows[1]["changes"]) == ("0.75 x static's reservation", "no replay of static", "2")
    for row, report in zip(rows, (twin, real)):
        assert (page.parent / row["link"]).resolve() == (report.parent / "report.html").resolve()
    text = page.read_text()
    assert "&lt;on the same load&gt;" in text and 'href="../a-1-ysb-20260101T000000/report.html"' in text
    assert (
        "| a-1-ysb | ysb | 1 x | flinktune met all 3 goals <on the same load> | 6.0 vs 12.0 (0.50 x) |"
        in (page.parent / "overview.md").read_text()
    )
