"""benchmarks/forecasting/forecast_training_speed.py: CPU rows with numbers, a CUDA row that says why it is empty, bad options named."""

import pytest
import torch

from benchmarks.forecasting.forecast_training_speed import main


def test_cpu_rows_are_measured_and_a_missing_gpu_is_reported(capsys):
    rows = main(
        [
            "--hours",
            "1",
            "--epochs",
            "1",
            "--resolutions",
            "10,30",
            "--context-s",
            "600",
            "--horizon-s",
            "300",
            "--devices",
            "cpu,cuda",
        ]
    )
    cpu = [r for r in rows if r["device"] == "cpu"]
    assert [r["resolution_s"] for r in cpu] == [10, 30]
    assert [(r["input_bins"], r["output_bins"]) for r in cpu] == [(60, 30), (20, 10)]
    assert cpu[0]["bins"] == 360 and cpu[0]["windows"] == 360 - 60 - 30 + 1
    assert all(r["fit_s"] > 0 and r["predict_ms"] > 0 for r in cpu)
    cuda = [r for r in rows if r["device"] == "cuda"]
    if not torch.cuda.is_available():
        assert all(r["note"].startswith("not measured: no CUDA device") and "fit_s" not in r for r in cuda)
    assert "| resolution_s | device |" in capsys.readouterr().out


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_gpu_row_reports_a_speedup_against_cpu():
    rows = main(["--hours", "1", "--epochs", "1", "--resolutions", "10", "--context-s", "600", "--horizon-s", "300"])
    assert rows[1]["device"] == "cuda" and rows[1]["fit_s"] > 0 and rows[1]["speedup"] > 0


def test_bad_options_are_refused_with_the_option_named(capsys):
    with pytest.raises(SystemExit):
        main(["--resolutions", "1,x"])
    assert "--resolutions: expected a comma-separated list" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["--devices", "tpu"])
    assert "--devices: unknown device(s) ['tpu']" in capsys.readouterr().err
    with pytest.raises(ValueError, match="must be multiples of the resolution 7 s"):
        main(["--resolutions", "7", "--devices", "cpu", "--hours", "1"])
