"""benchmarks/fidelity/measured_spread.py: the measured runs' spread, from the folder's per-run summary."""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd
import pytest

from benchmarks.fidelity.measured_spread import main, parse_twin, spread_table
from tests.benchmarks.ads_folder import ADS_DATA

COLUMNS = ["run", "method", "cpu_cores_mean", "mem_gib_mean", "lat_median_ms", "lat_p95_ms", "lat_p99_ms", "n_rec_gt180",
           "n_reconfigs"]  # fmt: skip


def _folder(tmp_path: Path, rows: list[list]) -> Path:
    pd.DataFrame(rows, columns=COLUMNS).to_csv(tmp_path / "summary_per_run.csv", index=False)
    return tmp_path


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    return _folder(tmp_path, [
        ["1_baseline_X", "baseline", 10.0, 40.0, 100.0, 100.0, 200.0, 0, None],
        ["1_demeter_X", "demeter", 8.0, 20.0, 100.0, 100.0, 200.0, 0, 40],
        ["2_demeter_X", "demeter", 6.0, 20.0, 100.0, 400.0, 200.0, 1, 50],
    ])  # fmt: skip


def test_each_method_gets_its_runs_mean_and_the_standard_error_of_that_mean(folder: Path) -> None:
    t = spread_table(folder).set_index(["policy", "figure"])
    cpu = t.loc[("demeter", "cpu")]
    assert cpu["runs"] == "0.8 / 0.6" and cpu["mean"] == pytest.approx(0.7)
    assert cpu["se"] == pytest.approx(0.1) and cpu["se_over_tolerance"] == pytest.approx(0.1 / 0.08)
    p95 = t.loc[("demeter", "p95")]  # ratios 1 and 4: geometric mean 2, standard error a factor of 2
    assert p95["mean"] == pytest.approx(2.5) and p95["geometric_mean"] == pytest.approx(2.0)
    assert p95["se"] == pytest.approx(2.0) and p95["se_over_tolerance"] == pytest.approx(1.0)
    assert t.loc[("demeter", "memory"), "se"] == pytest.approx(0.0)
    assert "baseline" not in t.index.get_level_values("policy")


def test_the_twin_is_judged_on_the_mean_and_against_each_run(folder: Path) -> None:
    t = spread_table(folder, {("demeter", "p95"): 3.0, ("demeter", "cpu"): 0.85}).set_index(["policy", "figure"])
    assert t.loc[("demeter", "p95"), "meets_mean"] == "yes"  # 3 against the mean 2.5: within 2x
    assert t.loc[("demeter", "p95"), "within_runs"] == "run 2"  # 3x of run 1's 1.0 is outside, 0.75x of 4.0 inside
    assert t.loc[("demeter", "cpu"), "meets_mean"] == "no"  # 0.85 against 0.7: outside +-0.08
    assert t.loc[("demeter", "cpu"), "within_runs"] == "run 1"
    assert pd.isna(t.loc[("demeter", "memory"), "twin"])


def test_the_real_folder_runs_and_its_figures_come_from_the_file() -> None:
    data = ADS_DATA
    if not (data / "summary_per_run.csv").exists():
        pytest.skip(f"real data not found at {data}")
    runs = pd.read_csv(data / "summary_per_run.csv")
    t = spread_table(data).set_index(["policy", "figure"])
    base = runs[runs["method"] == "baseline"]["cpu_cores_mean"].mean()
    demeter = runs[runs["method"] == "demeter"]["cpu_cores_mean"] / base
    assert t.loc[("demeter", "cpu"), "mean"] == pytest.approx(demeter.mean())
    assert t.loc[("demeter", "cpu"), "se"] == pytest.approx(demeter.std(ddof=1) / math.sqrt(len(demeter)))
    assert {"demeter", "autoscaler", "reactive"} <= set(t.index.get_level_values("policy"))


@pytest.mark.parametrize(
    ("rows", "message"),
    [
        (None, "no summary_per_run.csv"),
        ([["1_demeter_X", "demeter", 8.0, 20.0, 100.0, 100.0, 200.0, 0, 40]], "no run of the static method 'baseline'"),
    ],
)
def test_a_folder_without_the_summary_or_without_static_is_named(tmp_path: Path, rows, message: str) -> None:
    if rows is not None:
        _folder(tmp_path, rows)
    with pytest.raises(SystemExit, match=message):
        spread_table(tmp_path)


def test_a_missing_column_is_named(tmp_path: Path) -> None:
    pd.DataFrame({"run": ["1_baseline_X"], "method": ["baseline"], "cpu_cores_mean": [1.0]}).to_csv(
        tmp_path / "summary_per_run.csv", index=False
    )
    with pytest.raises(SystemExit, match=r"summary_per_run\.csv: missing column.*mem_gib_mean"):
        spread_table(tmp_path)


def test_twin_figures_parse_and_bad_ones_are_named() -> None:
    assert parse_twin("demeter:memory=0.758,p95=15.8; reactive:cpu=0.66") == {
        ("demeter", "memory"): 0.758, ("demeter", "p95"): 15.8, ("reactive", "cpu"): 0.66,
    }  # fmt: skip
    with pytest.raises(ValueError, match="not POLICY:FIGURE=VALUE"):
        parse_twin("demeter")
    with pytest.raises(ValueError, match="must be one of cpu, memory"):
        parse_twin("demeter:mem=1")
    with pytest.raises(ValueError, match="'x' is not a number"):
        parse_twin("demeter:cpu=x")


def test_the_command_prints_a_table(folder: Path, capsys) -> None:
    assert main(["--data", str(folder), "--twin", "demeter:p95=3"]) == 0
    out = capsys.readouterr().out
    assert "| demeter" in out and "within_runs" in out and "run 2" in out
