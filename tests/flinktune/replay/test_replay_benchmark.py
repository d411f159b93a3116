"""The replay benchmark: same trace, seed and failures for every policy; tables relative to static."""

from __future__ import annotations

import json

import pytest

from flinktune.config_space import default_space
from flinktune.replay import ReplaySettings, cli_replay, relative_table, replay_policy, resolve_policies
from flinktune.twin import ClusterProfile, generate_trace


@pytest.mark.slow
def test_cli_replay_writes_table_json_and_plots(tmp_path):
    out = cli_replay("ysb", "static,reactive,ds2,oracle", hours=1.0, failures="every:20m", seed=3, out_dir=tmp_path, workers=1)
    doc = json.loads((tmp_path / "replay-ysb.json").read_text())
    rel = doc["relative"]
    assert rel["static"]["cpu_core_hours"] == pytest.approx(1.0) and rel["static"]["latency_p95_ms"] == pytest.approx(1.0)
    assert doc["absolute"]["static"]["failures"] == 2  # at 20 and 40 min of the hour, for every policy
    assert {p: doc["absolute"][p]["failures"] >= 2 for p in rel} == {p: True for p in rel}
    assert rel["oracle"]["cpu_core_hours"] < 1.0 and doc["absolute"]["oracle"]["reconfigurations"] >= 1
    md = (tmp_path / "replay-ysb.md").read_text()
    assert "| oracle |" in md and "flinktune replay --trace ysb" in md
    assert (tmp_path / "replay-ysb-cost.png").stat().st_size > 0 and out["policies"][0] == "static"
    assert not list(tmp_path.glob(".*tmp*"))  # written atomically


def test_bad_arguments_are_named():
    with pytest.raises(ValueError, match="unknown policy"):
        resolve_policies("static,magic")
    with pytest.raises(ValueError, match="failure schedule 'sometimes'"):
        cli_replay("ysb", "static", hours=1.0, failures="sometimes", out_dir="/nonexistent")
    with pytest.raises(FileNotFoundError, match="neither a built-in workload"):
        cli_replay("nope.csv", "static", hours=1.0, out_dir="/nonexistent")
    with pytest.raises(ValueError, match="reference policy 'static'"):
        relative_table({"ds2": {}})


@pytest.mark.slow
def test_model_policy_replays_with_in_process_models_and_pays_for_profiling():
    trace = generate_trace("ysb", 1.0, 5)
    run = replay_policy("demeter", trace, ClusterProfile.default("ysb"), default_space(), ReplaySettings(seed=5))
    s = run.summary
    assert s["profiling_runs"] >= 16 and s["profiling_cpu_core_hours"] > 0
    assert s["cpu_core_hours"] > s["profiling_cpu_core_hours"]
