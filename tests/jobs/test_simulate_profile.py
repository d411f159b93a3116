"""jobs.simulate and jobs.profile end to end on a private var dir (real lake, real parquet)."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from flinktune.config_space import ConfigError
from flinktune.lake import Lake
from flinktune.metrics.schema import PROFILING_COLUMNS
from flinktune.runs.twin_profiling import DESIGN_SIZE, STARTUP_RUNS
from flinktune.twin.job_store import load_job, upcoming_rates
from flinktune.twin.workload import TraceError
from jobs import profile as profile_job
from jobs import simulate


def test_simulate_writes_hourly_raw_metrics_and_persists_twin_and_trace(settings) -> None:
    out = simulate.run(job="demo", workload="ysb", hours=1.6, seed=7, settings=settings)
    assert out["end_ms"] - out["start_ms"] == 5760 * 1000 and len(out["files"]) == 2
    raw = Lake(settings.lake_dir).read_raw("demo")
    assert len(raw) == out["rows"] and raw["ts_ms"].nunique() == 5760
    restarts = raw[raw["metric"] == "numRestarts"]["value"].max()
    assert restarts == 2  # every 45 minutes: at 45 and 90 minutes
    cfg = raw[raw["metric"] == "configParallelism"]["value"].unique()
    assert cfg.tolist() == [24.0]  # static max
    twin, trace = load_job(settings.twin_dir, "demo")
    assert twin.now * 1000 == out["end_ms"] and len(twin.history()) == 5760
    assert len(trace) == int((1.6 + simulate.TRACE_EXTRA_HOURS) * 3600)
    # The decision job continues the same trace where the twin stopped.
    nxt = upcoming_rates(trace, twin, 600)
    np.testing.assert_array_equal(nxt, trace.to_numpy()[5760:6360])
    assert not list(settings.twin_dir.rglob(".*.tmp"))


def test_simulate_from_trace_file_and_its_errors(settings, tmp_path) -> None:
    f = tmp_path / "trace.csv"
    lines = ["timestamp|value"] + [f"{1704067200 + 10 * i}|{30000 + 10 * i}" for i in range(721)]
    f.write_text("\n".join(lines) + "\n")
    out = simulate.run(job="file", hours=1.0, trace_file=f, settings=settings)
    assert out["start_ms"] == 1704067200000 and out["end_ms"] == 1704067200000 + 3600 * 1000
    with pytest.raises(TraceError, match=r"trace\.csv: the trace covers 7201 s"):
        simulate.run(job="file", hours=3.0, trace_file=f, settings=settings)
    with pytest.raises(ValueError, match="'nexmark'"):
        simulate.run(job="x", workload="nexmark", settings=settings)


def test_simulate_main_prints_one_json_line(settings, monkeypatch, capsys) -> None:
    monkeypatch.setenv("FLINKTUNE_VAR_DIR", str(settings.var_dir))
    simulate.main(["--job", "cli", "--hours", "0.1", "--workload", "tsw"])
    lines = capsys.readouterr().out.strip().splitlines()
    assert len(lines) == 1 and json.loads(lines[0])["job"] == "cli"


def test_profile_writes_observations_for_the_simulated_job(settings) -> None:
    simulate.run(job="demo", hours=0.5, settings=settings)
    cfg = {"parallelism": 12, "task_slots": 2, "cpu": 2.0, "memory_mb": 2048, "checkpoint_interval_s": 30}
    out = profile_job.run(job="demo", configs=[cfg], duration_s=120, settings=settings)
    assert out["rows"] == 4  # one config at the quartiles and p95 of the simulated input
    path = settings.lake_dir / "curated" / "profiling_observations" / "job=demo"
    files = list(path.glob("part-*.parquet"))
    assert [str(f) for f in files] == [out["path"]]
    df = pd.read_parquet(files[0])
    assert list(df.columns) == [c for c in PROFILING_COLUMNS if c != "job"]
    assert (df["parallelism"] == 12).all() and df["input_rate"].between(15_000, 95_000).all()
    # Re-profiling the same runs rewrites the same file (idempotent).
    assert profile_job.run(job="demo", configs=[cfg], duration_s=120, settings=settings)["path"] == out["path"]
    assert not list(path.glob(".*"))


def test_default_profiling_is_the_policys_startup_design_around_the_latest_peak(settings) -> None:
    from flinktune.config_space import default_space
    from flinktune.tuner.shapes import startup_design
    from flinktune.twin.job_store import TWIN_FILE, job_dir
    from flinktune.twin.simulator import TwinJob

    simulate.run(job="demo", hours=0.5, settings=settings)
    rates = TwinJob.load(job_dir(settings.twin_dir, "demo") / TWIN_FILE).history()["rate"].to_numpy()
    peak = rates[-settings.forecast_horizon_s :].max()
    out = profile_job.run(job="demo", settings=settings)
    df = pd.read_parquet(out["path"])
    design = startup_design(default_space(), STARTUP_RUNS, 0)
    assert out["rows"] == 2 * len(design) == 6
    assert sorted({tuple(r) for r in df[["parallelism", "task_slots", "cpu", "memory_mb"]].to_numpy().tolist()}) == sorted(
        {(c.parallelism, c.task_slots, c.cpu, c.memory_mb) for c in design}
    )
    # Two loads: half and 1.1 x the latest peak (the measured mean is within the generator's 2 % jitter).
    for target in (0.5 * peak, 1.1 * peak):
        assert (abs(df["input_rate"] / target - 1) < 0.03).sum() == len(design)
    # The profiler stops waiting for a recovery at twice the limit.
    assert df["recovery_s"].max() <= 2 * settings.recovery_limit_s


def test_profile_defaults_without_a_twin_and_bad_configs(settings) -> None:
    out = profile_job.run(job="fresh", rates=[40_000], duration_s=60, settings=settings)
    assert out["rows"] == STARTUP_RUNS  # the policy's start-up shapes
    out = profile_job.run(job="fresh", rates=[40_000], duration_s=60, settings=settings, design="space")
    assert out["rows"] == DESIGN_SIZE
    with pytest.raises(ValueError, match="design must be 'startup' or 'space'"):
        profile_job.run(job="fresh", settings=settings, design="grid")
    with pytest.raises(ConfigError, match=r"configs\[0\]: unknown key\(s\) \['cores'\]"):
        profile_job.run(job="fresh", configs=[{"cores": 2}], settings=settings)


def test_profile_refuses_on_a_real_cluster_and_writes_no_twin_rows(settings, monkeypatch) -> None:
    monkeypatch.setenv("FLINKTUNE_CLUSTER", "kubernetes")
    with pytest.raises(ValueError, match=r"twin only.*flinktune_profile DAG") as caught:
        profile_job.run(job="wordcount", rates=[20_000.0], duration_s=60, settings=settings)
    assert "\n" not in str(caught.value)
    assert not settings.lake_dir.exists() or not list(settings.lake_dir.rglob("*.parquet"))
