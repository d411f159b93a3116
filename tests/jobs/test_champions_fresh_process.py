"""Both champions, as the training jobs register them, load by alias in a fresh process and answer their input example.

The child process gets no PYTHONPATH and runs in a folder without this repository, so the pyfunc
wrappers can only come from the code shipped inside the models; its environment names just the
MLflow tracking and registry URIs (plus HOME and telemetry off).
"""

import json
import os
import subprocess
import sys

import mlflow
import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from flinktune.config_space import KNOBS, ConfigSpace
from flinktune.lake import Lake
from flinktune.metrics.schema import PROFILING_COLUMNS
from flinktune.settings import Settings
from jobs import train_forecaster, train_surrogate

_CHILD = r"""
import json, os, sys
import mlflow

out = {"repo_on_path": any(p and os.path.isdir(os.path.join(p, "flinktune")) for p in sys.path)}
for name in sys.argv[1:]:
    uri = f"models:/{name}@champion"
    model = mlflow.pyfunc.load_model(uri)
    example = model.metadata.load_input_example(uri)
    answer = model.predict(example)  # predict-time params: the signature's defaults
    numbers = answer.select_dtypes("number")
    out[name] = {"rows_in": len(example), "columns_in": list(example.columns),
                 "schema_in": model.metadata.get_input_schema().input_names(),
                 "rows_out": len(answer), "columns_out": list(answer.columns), "numeric": list(numbers.columns),
                 "numbers": numbers.to_numpy().tolist()}
print(json.dumps(out))
"""


def _write(path, frame):
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pandas(frame, preserve_index=False), path)


def _features(hours=5.0):
    n = int(hours * 60)
    t = np.arange(n)
    rate = 30_000 + 15_000 * np.sin(2 * np.pi * t / 90) + np.random.default_rng(0).normal(0, 1_000, n)
    return pd.DataFrame(
        {"window_start": pd.date_range("2024-03-01", periods=n, freq="60s", tz="UTC"), "input_rate": rate, "throughput": 30_000.0}
    )


def _observations(n, seed):
    rng = np.random.default_rng(seed)
    cands = ConfigSpace().candidates()
    picks = [cands[i] for i in rng.choice(len(cands), n, replace=False)]
    rate = rng.uniform(10_000, 60_000, n)
    p = np.array([c.parallelism for c in picks], dtype=float)
    frame = pd.DataFrame([c.to_dict() for c in picks])
    frame["job"], frame["run_id"], frame["ts_ms"] = "demo", [f"r{i}" for i in range(n)], 1_700_000_000_000 + np.arange(n)
    frame["input_rate"], frame["throughput"] = rate, rate
    frame["latency_ms"] = 30 * np.exp(rate / (4_000 * p))
    frame["recovery_s"] = 20 + frame["checkpoint_interval_s"] * rate / 30_000
    frame["cpu_used"] = np.minimum([c.total_cpu for c in picks], rate / 20_000)
    frame["memory_used_mb"] = 0.6 * frame["memory_mb"] * np.ceil(p / frame["task_slots"])
    return frame[list(PROFILING_COLUMNS)]


def test_both_champions_load_by_alias_in_a_fresh_process_and_predict_their_input_example(tmp_path):
    settings = Settings(
        var_dir=tmp_path / "var",
        device="cpu",
        mlflow_tracking_uri=f"sqlite:///{tmp_path / 'mlflow.db'}",
        mlflow_artifact_root=tmp_path / "artifacts",
    )
    lake = Lake(settings.lake_dir)
    _write(lake.curated_dir("features_1m") / "job=demo" / "date=2024-03-01" / "part-0.parquet", _features())
    _write(lake.curated_dir("profiling_observations") / "job=demo" / "part-0.parquet", _observations(14, seed=1))
    fc = train_forecaster.run(job="demo", settings=settings, candidates=("darts-peak-linear",), stride_bins=5)
    first = train_surrogate.run(job="demo", settings=settings)
    again = train_surrogate.run(job="demo", settings=settings)  # same data: registered, not promoted
    assert (fc["champion"], first["champion"], again["promoted"]) == ("1", "1", False)
    client = mlflow.MlflowClient()
    forecaster, surrogate = fc["model_name"], first["model_name"]
    assert str(client.get_model_version_by_alias(surrogate, "challenger").version) == "2"
    assert str(client.get_model_version_by_alias(surrogate, "champion").version) == "1"

    env = {
        "MLFLOW_TRACKING_URI": settings.mlflow_tracking_uri,
        "MLFLOW_REGISTRY_URI": settings.mlflow_tracking_uri,
        "HOME": str(tmp_path),
        "MLFLOW_DISABLE_TELEMETRY": "true",
        "PATH": os.environ.get("PATH", "/usr/bin"),
    }
    child = tmp_path / "elsewhere"
    child.mkdir()
    done = subprocess.run(
        [sys.executable, "-c", _CHILD, forecaster, surrogate], cwd=child, env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["repo_on_path"] is False

    f = out[forecaster]
    assert f["columns_in"] == f["schema_in"] == ["ts", "value"] and f["rows_in"] >= 240
    # The example's horizon (600 s of 60 s bins) gives 10 forecast bins, each with a mean and quantiles.
    assert f["rows_out"] == 10 and {"bin_start", "mean", "q0.9"} <= set(f["columns_out"])
    mean = np.asarray(f["numbers"])[:, f["numeric"].index("mean")]
    assert np.isfinite(f["numbers"]).all() and 10_000 < np.median(mean) < 50_000  # the series swings 15k..45k

    s = out[surrogate]
    assert s["columns_in"] == s["schema_in"] == [*KNOBS, "rate"] and s["rows_in"] == 3
    assert s["rows_out"] == 3 and "latency_ms_median" in s["columns_out"] and np.isfinite(s["numbers"]).all()
    # The child's answer is the champion's answer in this process, on the same rows.
    here = mlflow.pyfunc.load_model(f"models:/{surrogate}@champion")
    answer = here.predict(here.metadata.load_input_example(f"models:/{surrogate}@champion"))
    np.testing.assert_allclose(np.asarray(s["numbers"]), answer[s["numeric"]].to_numpy(), rtol=1e-6)
