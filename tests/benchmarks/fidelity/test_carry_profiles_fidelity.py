"""twin_fidelity.py --carry-profiles on a small slice of the real data: Demeter as a chain, compared per rank."""

from __future__ import annotations

import shutil
from pathlib import Path

import pandas as pd
import pytest

from benchmarks.fidelity.carried_profiles import measured_runs
from benchmarks.fidelity.twin_fidelity import main
from tests.benchmarks.ads_folder import ads_slice


@pytest.fixture(scope="module")
def slice_dir(tmp_path_factory) -> Path:
    return ads_slice(tmp_path_factory.mktemp("ads-carry-slice"), hours=1)


def test_measured_runs_one_row_per_run_in_run_order(slice_dir) -> None:
    m = measured_runs(slice_dir)
    per_run = pd.read_csv(slice_dir / "summary_per_run.csv")
    dem = per_run[per_run["method"] == "demeter"].drop_duplicates("run").sort_values("run")
    base = pd.read_csv(slice_dir / "summary_by_method.csv").set_index("method").loc["baseline"]
    assert list(m.index) == list(range(1, len(dem) + 1))  # the folder's run 1 row appears twice: one rank
    assert m["memory"].tolist() == pytest.approx((dem["mem_gib_mean"] / base["mem_gib_mean"]).tolist())
    assert m["reconfigurations"].tolist() == dem["n_reconfigs"].tolist()
    assert (m["profiling_jobs"] > 0).all() and "at_default" not in m  # the slice has no measured_60s
    (slice_dir / "none").mkdir()
    shutil.copy(slice_dir / "summary_by_method.csv", slice_dir / "none" / "summary_by_method.csv")
    with pytest.raises(ValueError, match=r"no summary_per_run\.csv"):
        measured_runs(slice_dir / "none")
    with pytest.raises(ValueError, match="no measured run of method 'nosuch'"):
        measured_runs(slice_dir, "nosuch")


def test_measured_runs_take_the_share_at_the_default_per_run(slice_dir) -> None:
    ranks = list(measured_runs(slice_dir).index)
    m = measured_runs(slice_dir, at_default={ranks[0]: 0.25})
    assert m.loc[ranks[0], "at_default"] == 0.25 and m["at_default"].iloc[1:].isna().all()


def test_carry_profiles_gives_one_block_per_measured_run(slice_dir, capsys) -> None:
    argv = ["--data", str(slice_dir), "--skip-loro", "--policies", "static,demeter", "--seeds", "3", "--workers", "1"]
    assert main([*argv, "--max-nfev", "4", "--carry-profiles"]) == 0
    text = capsys.readouterr().out
    assert "carried profile database, per rank" in text
    ranks = measured_runs(slice_dir)
    block = text[text.index("per rank") :]
    rows = [line.split(" | ") for line in block.splitlines() if line.startswith("| ") and not line.startswith("| rank")]
    table = pd.DataFrame(
        [(int(r[0].strip("| ")), r[1], r[2], r[3]) for r in rows], columns=["rank", "figure", "twin", "measured"]
    )
    assert sorted(table["rank"].unique()) == list(ranks.index)
    for rank in ranks.index:
        got = table[table["rank"] == rank].set_index("figure")
        assert {"cpu", "memory", "p95", "slow_recoveries", "reconfigurations", "profiles_at_start"} <= set(got.index)
        # each rank against the measured run of that rank
        assert float(got.loc["memory", "measured"]) == pytest.approx(ranks.loc[rank, "memory"], abs=1e-3)
        assert float(got.loc["p95", "measured"]) == pytest.approx(ranks.loc[rank, "p95"], abs=1e-3)
    starts = table[table["figure"] == "profiles_at_start"].set_index("rank")["twin"].astype(float)
    runs = table[table["figure"] == "profiling_runs"].set_index("rank")["twin"].astype(float)
    # run 1 starts empty; each later run starts with everything the runs before it profiled
    assert starts.iloc[0] == 0 and (starts.iloc[1:].to_numpy() == runs.cumsum().iloc[:-1].to_numpy()).all()
