"""benchmarks/forecasting.py: seeds, the quick smoke run and the per-seed ratio table (peak model only, CPU)."""

import math

import pytest

from benchmarks.forecasting import main, ratio_table


def test_quick_run_covers_every_seed_with_fewer_origins():
    rows = main(["--quick", "--hours", "5", "--train-hours", "4", "--select-hours", "1.5", "--seeds", "3,4",
                 "--workloads", "ysb", "--models", "peak-gbm"])
    assert [(r["seed"], r["workload"], r["model"]) for r in rows] == [(3, "ysb", "peak-gbm"), (4, "ysb", "peak-gbm")]
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
    rows = [{"seed": s, "workload": "ysb", "model": m, "vs_demeter": v, "under_rate": u}
            for s, m, v, u in [(7, "demeter-arima", 1.0, 0.01), (8, "demeter-arima", 1.0, 0.1),
                               (7, "peak-gbm", 0.9, 0.04), (8, "peak-gbm", 1.2, 0.02)]]
    table = ratio_table(rows).splitlines()
    assert table[0] == "| workload | model | seed 7 | seed 8 | mean | max under_rate |"
    assert table[3] == "| ysb | peak-gbm | 0.900 | 1.200 | 1.050 | 0.040 |"
