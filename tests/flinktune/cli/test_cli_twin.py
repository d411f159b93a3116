"""`flinktune twin calibrate` and `flinktune twin predict` on files, as a user runs them."""

import json

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from flinktune.calibration.mechanism import apply_params
from flinktune.cli.main import app
from flinktune.config_space import ConfigSpace
from flinktune.twin import mechanics as mech
from flinktune.twin.profile import ClusterProfile
from flinktune.twin.profiling import profile_configs

runner = CliRunner()


def test_calibrate_then_predict_round_trip(tmp_path):
    base = ClusterProfile.default()
    truth = apply_params(base, {"cost_scale": 1.25, "queue_ms": 60.0})
    space = ConfigSpace()
    stable = [
        c for c in space.candidates() if mech.memory_pressure(truth, mech.layout(truth, c), 90_000)[0] < truth.oom_pressure_start
    ]
    rng = np.random.default_rng(1)
    configs = [stable[i] for i in rng.choice(len(stable), 16, replace=False)]
    obs = profile_configs(truth, configs, [20_000, 50_000], duration_s=180, seed=2)
    obs = obs.drop(columns=["cpu_used"])  # optional column: calibration works without it
    obs.loc[obs.index[:3], "recovery_s"] = np.nan  # recovery may be empty
    csv = tmp_path / "obs.csv"
    obs.to_csv(csv, index=False)
    out = tmp_path / "profile.yaml"
    res = runner.invoke(app, ["twin", "calibrate", "--observations", str(csv), "--out", str(out), "--duration-s", "180"])
    assert res.exit_code == 0, res.output
    summary = json.loads(res.output.strip().splitlines()[-1])
    assert summary["holdout"]["throughput_mape"] <= 0.10
    assert abs(summary["params"]["cost_scale"] - 1.25) / 1.25 <= 0.10
    calibrated = ClusterProfile.from_yaml(out)
    assert calibrated.queue_ms != base.queue_ms

    table = tmp_path / "configs.csv"
    obs[["parallelism", "task_slots", "cpu", "memory_mb", "checkpoint_interval_s", "input_rate"]].head(4).to_csv(
        table, index=False
    )
    pred_out = tmp_path / "pred.csv"
    res = runner.invoke(app, ["twin", "predict", "--input", str(table), "--profile", str(out), "--out", str(pred_out)])
    assert res.exit_code == 0, res.output
    pred = __import__("pandas").read_csv(pred_out)
    assert {"throughput", "latency_ms", "recovery_s", "cpu_used"} <= set(pred.columns) and len(pred) == 4
    assert (pred["throughput"] <= pred["input_rate"] * 1.001).all()


def test_calibrate_names_bad_file_content(tmp_path):
    csv = tmp_path / "obs.csv"
    csv.write_text(
        "parallelism,task_slots,cpu,memory_mb,checkpoint_interval_s,input_rate,throughput,latency_ms,recovery_s\n"
        "8,1,1,1024,10,1000,1000,50,\n8,1,1,1024,10,2000,2000,fast,\n8,1,1,1024,10,3000,3000,70,\n"
    )
    res = runner.invoke(app, ["twin", "calibrate", "--observations", str(csv), "--out", str(tmp_path / "p.yaml")])
    assert res.exit_code == 2 and "latency_ms" in res.output and "row 1" in res.output
    assert not (tmp_path / "p.yaml").exists()
    res = runner.invoke(app, ["twin", "predict", "--input", str(csv), "--workload", "nope"])
    assert res.exit_code != 0


def test_calibrate_group_by_run_writes_grey_box_that_predict_uses(tmp_path):
    # Simulated runs in three groups (as Demeter's three real runs): leave-one-group-out scores, the
    # mechanism profile and the whole grey-box twin; predict reads the latter.
    truth = ClusterProfile.default()
    rng = np.random.default_rng(4)
    configs = [ConfigSpace().candidates()[i] for i in rng.choice(200, 8, replace=False)]
    obs = profile_configs(truth, configs, [15_000, 40_000], duration_s=120, seed=5).drop(columns=["cpu_used"])
    obs["run"] = np.arange(len(obs)) % 3
    csv, out = tmp_path / "runs.csv", tmp_path / "p.yaml"
    obs.to_csv(csv, index=False)
    res = runner.invoke(
        app,
        [
            "twin",
            "calibrate",
            "--observations",
            str(csv),
            "--out",
            str(out),
            "--group-by",
            "run",
            "--duration-s",
            "120",
            "--max-nfev",
            "4",
        ],
    )
    assert res.exit_code == 0, res.output
    summary = json.loads(res.output.strip().splitlines()[-1])
    assert np.isfinite(summary["leave_one_out_mean"]["throughput_mape"])
    # No measured_60s/ beside the runs: each calibration on measured methods says so instead of guessing.
    notes = " | ".join(summary["notes"])
    for said in (
        "restart cost: not calibrated",
        "redeploy downtime: not calibrated",
        "redeploy warm-up: not calibrated: no measured operator run",
        "CPU not calibrated",
    ):
        assert said in notes, notes
    assert ClusterProfile.from_yaml(out).shared_core_knee > 0
    table = tmp_path / "configs.csv"
    obs.drop(columns=["run"]).head(3).to_csv(table, index=False)
    res = runner.invoke(app, ["twin", "predict", "--input", str(table), "--grey-box", summary["grey_box"]])
    assert res.exit_code == 0, res.output
    assert "throughput_lo" in res.output.splitlines()[0]
    res = runner.invoke(app, ["twin", "calibrate", "--observations", str(csv), "--out", str(out), "--group-by", "nope"])
    assert res.exit_code != 0 and "missing column(s) ['nope']" in res.output


def _observations(tmp_path, n: int = 10):
    truth = apply_params(ClusterProfile.default(), {"cost_scale": 1.25, "queue_ms": 60.0})
    space = ConfigSpace()
    stable = [
        c for c in space.candidates() if mech.memory_pressure(truth, mech.layout(truth, c), 90_000)[0] < truth.oom_pressure_start
    ]
    rng = np.random.default_rng(1)
    configs = [stable[i] for i in rng.choice(len(stable), n, replace=False)]
    return profile_configs(truth, configs, [20_000, 50_000], duration_s=180, seed=2).drop(columns=["cpu_used"])


def _calibrate(tmp_path, obs, name: str, *extra: str):
    csv = tmp_path / f"{name}.csv"
    obs.to_csv(csv, index=False)
    out = tmp_path / f"{name}.yaml"
    args = ["twin", "calibrate", "--observations", str(csv), "--out", str(out), "--duration-s", "180", *extra]
    return runner.invoke(app, args), csv, out


def test_a_zero_rate_row_is_dropped_by_name_and_the_profile_is_the_one_without_it(tmp_path):
    obs = _observations(tmp_path)
    clean, _, clean_out = _calibrate(tmp_path, obs, "clean")
    assert clean.exit_code == 0, clean.output
    holed = obs.copy()
    gap = holed.iloc[[4]].assign(input_rate=0.0)  # a gap in the rate reading, inserted as row 5
    holed = pd.concat([holed.iloc[:5], gap, holed.iloc[5:]], ignore_index=True)
    res, csv, out = _calibrate(tmp_path, holed, "holed")
    assert res.exit_code == 0, res.output
    assert f"{csv}: row 5 dropped: input_rate 0 rec/s" in res.stderr
    assert out.read_text() == clean_out.read_text()
    # --strict refuses the same file in one line.
    strict, _, _ = _calibrate(tmp_path, holed, "strict", "--strict")
    assert strict.exit_code == 2 and len(strict.stderr.strip().splitlines()) == 1 and "row 5" in strict.stderr


@pytest.mark.parametrize(
    ("change", "needle"),
    [
        (lambda o: o.assign(latency_ms=o["latency_ms"] / 1000), "rows fail the physical checks"),  # seconds as ms
        (lambda o: o.assign(throughput=o["input_rate"] * 10), "rows fail the physical checks"),
        (lambda o: pd.concat([o.head(2)] * 10, ignore_index=True), "an exact duplicate"),
        (lambda o: o.head(2), "distinct configuration(s) left"),
    ],
    ids=["latency-in-seconds", "throughput-above-input", "duplicated-rows", "two-configurations"],
)
def test_a_file_that_fails_the_physics_is_refused(tmp_path, change, needle):
    res, _, out = _calibrate(tmp_path, change(_observations(tmp_path, 6)), "bad")
    assert res.exit_code == 2 and needle in res.stderr and len(res.stderr.strip().splitlines()) == 1, res.output
    assert not out.exists()


def test_empty_recovery_is_named_not_scored_as_nan(tmp_path):
    res, _, _ = _calibrate(tmp_path, _observations(tmp_path, 6).assign(recovery_s=np.nan), "norec")
    assert res.exit_code == 0, res.output
    assert "recovery is not calibrated" in res.stderr and "nan%" not in res.output
