"""The report's data-quality section: batches validated, quarantined and why, linking to GX Data Docs."""

from __future__ import annotations

import pandas as pd
import pytest

from data_contracts import ContractViolation, validate
from flinktune.config_space import default_space
from flinktune.lake import Lake
from flinktune.report import ReportInputs
from flinktune.report.content import report_content
from flinktune.report.quality import data_quality_from_lake
from flinktune.report.render import render_html, render_markdown
from tests.data_contracts.test_validate_pandas import observations
from tests.flinktune.report.test_report_writer import features


@pytest.fixture(scope="module")
def lake(tmp_path_factory):
    """A lake whose GX project validated one good and one broken batch of job j, and one of another job."""
    lake = Lake(tmp_path_factory.mktemp("lake"))
    args = {"quarantine_root": lake.quarantine_root, "gx_project": lake.quality_root}
    validate(observations(), "profiling_observations", batch_id="j-good", labels={"job": "j"}, **args)
    bad = observations()
    bad.loc[2, "latency_ms"] = -5.0
    with pytest.raises(ContractViolation):
        validate(bad, "profiling_observations", batch_id="j-bad", labels={"job": "j"}, **args)
    validate(observations(), "profiling_observations", batch_id="other-good", labels={"job": "other"}, **args)
    return lake


def test_quarantined_batch_shows_in_both_reports_with_its_reason_and_links(lake):
    dq = data_quality_from_lake(lake, "j")
    assert [b.batch_id for b in dq.batches] == ["j-good", "j-bad"] and dq.data_docs_index == lake.data_docs_index
    content = report_content(ReportInputs("j", features(), pd.DataFrame(), pd.DataFrame(), 1000.0, default_space(),
                                          data_quality=dq))  # fmt: skip
    section = content["data_quality"]
    assert (section["validated"], section["passed"], section["quarantined"]) == (2, 1, 1)
    bad = section["batches"][1]
    assert bad["status"] == "quarantined" and "latency_ms.range" in bad["why"][0] and "-5.0" in bad["why"][0]
    assert bad["quarantine"] == (lake.quarantine_root / "profiling_observations" / "j-bad").resolve().as_uri()
    assert bad["data_docs"].startswith("file://") and "j-bad" in bad["data_docs"]

    md = render_markdown(content)
    dq_md = md[md.index("## Data quality") :]
    assert "2 batches of this job validated" in dq_md and "1 quarantined" in dq_md and "other-good" not in dq_md
    assert "| quarantined | [error] rule latency_ms.range" in dq_md and f"[Data Docs]({bad['data_docs']})" in dq_md
    assert f"[all validation results]({lake.data_docs_index.resolve().as_uri()})" in dq_md

    html = render_html(content, [], "")
    assert '<tr class="quarantined">' in html and "rule latency_ms.range" in html
    assert f'id="data-docs-index" href="{lake.data_docs_index.resolve().as_uri()}"' in html


def test_report_without_a_batch_log_has_no_data_quality_section():

    content = report_content(ReportInputs("j", features(), pd.DataFrame(), pd.DataFrame(), 1000.0, default_space()))
    assert content["data_quality"] is None and "Data quality" not in render_markdown(content)
