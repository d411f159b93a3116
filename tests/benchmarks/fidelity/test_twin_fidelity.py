"""benchmarks/fidelity/twin_fidelity.py on a small slice of the real data (2 h of trace, 30 profiling runs): every figure is produced."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from benchmarks.fidelity.measured_folder import METHODS
from benchmarks.fidelity.twin_fidelity import CV_TARGETS, main, run
from tests.benchmarks.ads_folder import ads_slice


@pytest.fixture(scope="module")
def slice_dir(tmp_path_factory) -> Path:
    return ads_slice(tmp_path_factory.mktemp("ads-slice"), hours=2)


def test_every_figure_is_produced(slice_dir, tmp_path) -> None:
    out = tmp_path / "fidelity.md"
    r = run(slice_dir, out, hours=None, rows=None, seeds=[3], workers=1, command="test", max_nfev=4)
    assert r["rows"] == 30 and abs(r["hours"] - 2.0) < 0.01
    assert r["failures"] == "every:45m"  # the median gap of the measured injections
    for score in CV_TARGETS:
        assert np.isfinite(r["cv_mean"][score]), score
    table = r["comparison"]
    for pol in METHODS:
        rows = table[table["policy"] == pol]
        assert {"cpu", "memory", "p50", "p95", "p99", "slow_recoveries", "reconfigurations", "profiling_cpu"} <= set(
            rows["figure"]
        )
        assert np.isfinite(rows["twin"].astype(float)).all(), pol
        # The twin's every-second p95 is reported beside the observed one that the target compares.
        assert rows.set_index("figure").loc["p95_every_second", "target"] == "(reported)"
    assert {"ranking on cpu", "ranking on p95"} <= set(table["figure"])
    text = out.read_text()
    assert "leave-one-run-out" in text and "ranking on p95" in text and "reconfigurations" in text
    # The operator autoscaler the measured runs used, by default; the slice has no measured_60s: said so.
    assert r["operator"] == "demeter-1.6" and "Operator autoscaler: version `demeter-1.6`" in text
    assert "recorded recoveries below the 360 s cap lie within 6 s of a check" in text
    assert "busy time not calibrated" in r["busy_note"] and "no measured operator run" in r["redeploy_note"]
    assert r["targets"]["autoscaler"]["target_utilization"] == 0.35 and "busy_time_scale" not in r["targets"]["autoscaler"]
    # Measured figures come from the folder, not from constants: Demeter's CPU relative to static.
    demeter_cpu = table[(table["policy"] == "demeter") & (table["figure"] == "cpu")]["measured"].iloc[0]
    assert demeter_cpu == pytest.approx(19.62 / 24.0)


def test_a_folder_without_profiling_runs_is_named(tmp_path, capsys) -> None:
    with pytest.raises(SystemExit):
        main(["--data", str(tmp_path)])
    assert "no profiling_runs.csv" in capsys.readouterr().err


def test_loro_only_prints_the_scores_without_replaying(slice_dir, capsys) -> None:
    assert main(["--data", str(slice_dir), "--loro-only", "--max-nfev", "3"]) == 0
    text = capsys.readouterr().out
    assert "keeps_up_accuracy" in text and "Per held-out run" in text
    assert "ranking on p95" not in text  # no replay


def test_published_targets_come_from_the_measured_methods_names(tmp_path) -> None:
    from benchmarks.fidelity.measured_folder import published_targets

    assert published_targets(tmp_path) == {}  # no measured_60s: the policies' defaults
    folder = tmp_path / "measured_60s"
    folder.mkdir()
    for name in ("1_baseline_X_24.csv", "1_reactive35_X_24.csv", "2_reactive35_X_24.csv", "1_operator35_X_24.csv"):
        (folder / name).write_text("timestamp\n")
    # Reactive's HPA scales on CPU (calibrated); the operator targets busy time, which is not.
    assert published_targets(tmp_path) == {"reactive": {"target_utilization": 0.35}}
    (folder / "3_reactive50_X_24.csv").write_text("timestamp\n")
    assert published_targets(tmp_path) == {}  # two different targets: none is taken


def test_a_zero_rate_row_in_the_profiling_runs_is_dropped_with_a_line(tmp_path, capsys) -> None:
    """A gap in the rate reading (input_rate 0) in one real run's row: named and left out, no traceback."""
    import pandas as pd

    from benchmarks.fidelity.twin_fidelity import _screened_runs

    rows = [
        {"run": r, "parallelism": p, "task_slots": 2, "cpu": 2.0, "memory_mb": 4096, "checkpoint_interval_s": 30,
         "input_rate": 20_000.0 * r, "throughput": 20_000.0 * r, "latency_ms": 200.0, "recovery_s": 60.0}
        for r in (1, 2, 3) for p in (4, 8, 12)
    ]  # fmt: skip
    rows[4]["input_rate"] = 0.0
    pd.DataFrame(rows).to_csv(tmp_path / "profiling_runs.csv", index=False)
    runs = _screened_runs(tmp_path)
    assert len(runs) == 8 and (runs["input_rate"] > 0).all()
    assert "profiling_runs.csv: row 4 dropped: input_rate 0 rec/s" in capsys.readouterr().err
