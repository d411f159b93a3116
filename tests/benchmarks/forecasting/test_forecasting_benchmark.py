"""benchmarks/forecasting/forecasting.py: seeds, the quick smoke run and the per-seed ratio table (peak model only, CPU)."""

import math

import pytest

from benchmarks.forecasting.forecasting import main, ratio_table


def test_quick_run_covers_every_seed_with_fewer_origins():
    rows = main(
        [
            "--quick",
            "--hours",
            "5",
            "--train-hours",
            "4",
            "--select-hours",
            "1.5",
            "--seeds",
            "3,4",
            "--workloads",
            "ysb",
            "--models",
            "peak-gbm",
        ]
    )
    assert [(r["seed"], r["workload"], r["model"]) for r in rows] == [
        (3, "ysb", "peak-gbm"),
        (3, "ysb", "champion"),
        (4, "ysb", "peak-gbm"),
        (4, "ysb", "champion"),
    ]
    rows = [r for r in rows if r["model"] != "champion"]  # the only candidate, so a copy of its row
    # The rules come from 2.5-4 h (9 origins at stride 10); the last hour has 51 origins, at stride 10 all 6 are reported.
    assert all(r["origins"] == 6.0 for r in rows)
    assert rows[0]["peak_mae"] != rows[1]["peak_mae"]  # different traces
    assert all(math.isnan(r["vs_demeter"]) for r in rows)  # no Demeter in this run


def test_bad_arguments_are_refused_with_the_option_named(capsys):
    with pytest.raises(SystemExit):
        main(["--seeds", "7,x"])
    assert "--seeds: expected comma-separated integers" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["--seed", "7", "--seeds", "8"])
    assert "give --seed or --seeds" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["--models", "peak-gbm,arima"])
    assert "unknown ['arima']" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["--train-hours", "3", "--select-hours", "3"])
    assert "need 0 < --select-hours < --train-hours < --hours" in capsys.readouterr().err


def test_ratio_table_has_one_column_per_seed_and_their_mean():
    rows = [
        {"seed": s, "workload": "ysb", "model": m, "vs_demeter": v, "under_rate": u}
        for s, m, v, u in [
            (7, "demeter-arima", 1.0, 0.01),
            (8, "demeter-arima", 1.0, 0.1),
            (7, "peak-gbm", 0.9, 0.04),
            (8, "peak-gbm", 1.2, 0.02),
        ]
    ]
    table = ratio_table(rows).splitlines()
    assert table[0] == "| workload | model | seed 7 | seed 8 | mean | max under_rate |"
    assert table[3] == "| ysb | peak-gbm | 0.900 | 1.200 | 1.050 | 0.040 |"


def test_a_recorded_trace_runs_with_spans_in_thirds_and_a_champion_row(tmp_path):
    from flinktune.twin.workload import generate_trace

    raw = generate_trace("tsw", 9, 5)
    path = tmp_path / "real_load.csv"
    path.write_text("timestamp,value\n" + "\n".join(f"{int(t.timestamp())},{v:.1f}" for t, v in raw.iloc[::5].items()))
    rows = main(["--trace", str(path), "--quick", "--select-refits", "1", "--models", "peak-gbm,darts-peak-linear"])
    assert [r["model"] for r in rows] == ["peak-gbm", "darts-peak-linear", "champion"]
    assert {r["workload"] for r in rows} == {"real_load"}  # no generated workloads unless asked
    # Report on the last 3 h (180 minutes, 171 origins with a whole horizon; stride 10: 18).
    assert all(r["origins"] == 18.0 for r in rows)
    champion = rows[-1]
    assert champion["chosen"] in ("peak-gbm", "darts-peak-linear") and "lowest selection-span peak MAE" in champion["reason"]
    assert champion["peak_mae"] == next(r for r in rows if r["model"] == champion["chosen"])["peak_mae"]


def test_a_bad_trace_is_refused_naming_the_file_and_line(tmp_path, capsys):
    bad = tmp_path / "bad.csv"
    bad.write_text("timestamp,value\n1661724000,5\n1661724001,-3\n")
    with pytest.raises(SystemExit):
        main(["--trace", str(bad)])
    assert f"--trace: {bad}:3: rate '-3' must be a finite number >= 0" in capsys.readouterr().err
