"""jobs.train_forecaster and jobs.train_surrogate on small synthetic curated data in a tmp lake."""

import json

import mlflow
import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from flinktune.config_space import ConfigError, ConfigSpace
from flinktune.lake import Lake
from flinktune.metrics.schema import PROFILING_COLUMNS
from flinktune.runs.forecaster_candidates import CANDIDATES, build_candidate
from flinktune.settings import Settings
from jobs import train_forecaster, train_surrogate
from models import registry
from models.surrogate.gp import GPSurrogate


@pytest.fixture
def settings(tmp_path):
    return Settings(var_dir=tmp_path / "var", device="cpu")


def _write(path, frame):
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pandas(frame, preserve_index=False), path)


def _features(hours=7.0, seed=0):
    n = int(hours * 60)
    rng = np.random.default_rng(seed)
    t = np.arange(n)
    return pd.DataFrame(
        {
            "job": "demo",
            "window_start": pd.date_range("2024-03-01", periods=n, freq="60s", tz="UTC"),
            "input_rate": 30_000 + 15_000 * np.sin(2 * np.pi * t / 90) + rng.normal(0, 1_000, n),
            "throughput": 30_000.0,
        }
    )


def _observations(n, seed):
    rng = np.random.default_rng(seed)
    cands = ConfigSpace().candidates()
    picks = [cands[i] for i in rng.choice(len(cands), n, replace=False)]
    rate = rng.uniform(10_000, 60_000, n)
    p = np.array([c.parallelism for c in picks], dtype=float)
    cpu = np.array([c.total_cpu for c in picks])
    frame = pd.DataFrame([c.to_dict() for c in picks])
    frame["job"], frame["run_id"], frame["ts_ms"] = "demo", [f"r{seed}-{i}" for i in range(n)], 1_700_000_000_000 + np.arange(n)
    frame["input_rate"], frame["throughput"] = rate, rate
    frame["latency_ms"] = 30 * np.exp(rate / (4_000 * p))
    frame["recovery_s"] = 20 + frame["checkpoint_interval_s"] * rate / 30_000
    frame["cpu_used"] = np.minimum(cpu, rate / 20_000)
    frame["memory_used_mb"] = 0.6 * frame["memory_mb"] * np.ceil(p / frame["task_slots"])
    return frame[list(PROFILING_COLUMNS)]


def _check_logged_model_and_training_input(name, version, logged_name, dataset, rows, source):
    """The version points at a LoggedModel named after job and kind; its run has the lake data as training input."""
    client = mlflow.MlflowClient()
    mv = client.get_model_version(name, version)
    # The SQLite registry leaves model_id empty; the version's source is the LoggedModel's URI.
    assert mv.source.startswith("models:/m-")
    logged = client.get_logged_model(mv.model_id or mv.source.removeprefix("models:/"))
    assert logged.name == logged_name and logged.source_run_id == mv.run_id
    (inp,) = client.get_run(mv.run_id).inputs.dataset_inputs
    assert {t.key: t.value for t in inp.tags}["mlflow.data.context"] == "training"
    assert inp.dataset.name == dataset and json.loads(inp.dataset.profile)["num_rows"] == rows
    assert json.loads(inp.dataset.source)["uri"] == str(source.resolve())


def test_train_forecaster_logs_candidates_and_registers_a_champion_that_forecasts(settings):
    base = Lake(settings.lake_dir).curated_dir("features_1m") / "job=demo"
    feats = _features()
    _write(base / "date=2024-03-01" / "part-0.parquet", feats.drop(columns=["job"]))
    # The default pool is the benchmark's champion pool, TiDE and Theta (short histories) and the yardstick; the
    # boosted darts peak model, the darts ensemble and TiDE are left out here to keep this test cheap (they are
    # tested on their own).
    from benchmarks.forecasting.forecasting import CHAMPION_CANDIDATES

    assert set(CANDIDATES) == {*CHAMPION_CANDIDATES, "tide-quantile", "darts-theta", "seasonal-naive"}
    cands = ("peak-gbm", "darts-peak-linear", "darts-theta", "seasonal-naive")
    summary = train_forecaster.run(job="demo", settings=settings, candidates=cands, stride_bins=2)
    json.dumps(summary)  # XCom-ready
    assert summary["model_name"] == "flinktune-forecaster-demo"
    assert summary["version"] == "1" and summary["promoted"] and summary["champion"] == "1"
    assert set(summary["candidates"]) == set(cands)
    assert summary["best"] in ("peak-gbm", "darts-peak-linear", "darts-theta")
    m = summary["metrics"]
    # 105 held-out bins, 10-bin horizon, stride 2: 48 origins, all reported (the rules come from the 52 bins before).
    assert m["train_bins"] == 420 and m["origins"] == 48
    assert np.isfinite(m["peak_mae"]) and m["peak_mase"] > 0 and 0 <= m["under_rate"] <= 1
    client = mlflow.MlflowClient()
    runs = client.search_runs([client.get_experiment_by_name("flinktune-forecaster-demo").experiment_id])
    assert sorted(r.data.params["candidate"] for r in runs) == sorted(cands)
    for r in runs:
        assert [a.path for a in client.list_artifacts(r.info.run_id, "plots")] == ["plots/backtest.png"]
        assert r.data.tags["backtest_rule"] == summary["candidates"][r.data.params["candidate"]]["rule"]
    # Training records the rule it scored with, but tags no planning rule (no policy would read it).
    version = client.get_model_version("flinktune-forecaster-demo", "1")
    assert "planning_rule" not in version.tags and version.tags["promotion"] == "promoted: no champion yet"
    assert summary["promotion"] == version.tags["promotion"] and version.tags["promotion_metric"] == "peak_mae"
    _check_logged_model_and_training_input(
        "flinktune-forecaster-demo", "1", f"forecaster-demo-{summary['best']}", "features_1m-demo", 420, base
    )
    champion = registry.load_champion("flinktune-forecaster-demo")
    history = pd.Series(feats["input_rate"].to_numpy(), index=pd.DatetimeIndex(feats["window_start"]))
    fc = champion.predict(history, 600)
    assert len(fc.mean) == 10 and fc.start == history.index[-1] + pd.Timedelta(minutes=1)
    pf = mlflow.pyfunc.load_model("models:/flinktune-forecaster-demo@champion")
    frame = pd.DataFrame({"ts": feats["window_start"].astype("int64") // 10**6, "value": feats["input_rate"]})
    out = pf.predict(frame.tail(300), params={"horizon_s": 300})
    assert len(out) == 5 and {"bin_start", "mean", "q0.5", "q0.9", "q0.99"} <= set(out.columns)
    np.testing.assert_allclose(out["q0.9"].to_numpy(), champion.predict(history, 300).quantiles[0.9], rtol=1e-5)


def test_challenger_is_compared_with_the_champion_on_the_same_window(settings):
    base = Lake(settings.lake_dir).curated_dir("features_1m") / "job=demo"
    _write(base / "date=2024-03-01" / "part-0.parquet", _features().drop(columns=["job"]))
    first = train_forecaster.run(job="demo", settings=settings, candidates=("darts-theta",), stride_bins=2)
    assert (first["version"], first["promoted"], first["best"]) == ("1", True, "darts-theta")
    # The champion saw the window (refit on all history), so it is refit on the same training part:
    # its score on the shared window must equal its own first backtest exactly.
    kept = train_forecaster.run(
        job="demo", settings=settings, candidates=("tide-quantile",), n_epochs=3, stride_bins=2, margin=0.99
    )
    assert kept["champion_metrics"]["refit"] is True
    assert kept["champion_metrics"]["peak_mae"] == pytest.approx(first["metrics"]["peak_mae"], rel=1e-9)
    assert kept["metrics"]["champion_peak_mae"] == pytest.approx(first["metrics"]["peak_mae"], rel=1e-9)
    assert (kept["version"], kept["promoted"], kept["champion"]) == ("2", False, "1")
    tag = mlflow.MlflowClient().get_model_version("flinktune-forecaster-demo", "2").tags["promotion"]
    assert tag.startswith("kept champion: same window from 2024-03-01T05:15:00+00:00") and "margin 0.99" in tag
    won = train_forecaster.run(
        job="demo", settings=settings, candidates=("tide-quantile",), n_epochs=3, stride_bins=2, margin=0.0
    )
    # With no margin the decision is exactly "lower peak MAE on the shared window, no less safe".
    wins = won["metrics"]["peak_mae"] < won["champion_metrics"]["peak_mae"] and won["metrics"]["under_rate"] <= max(
        0.05, won["champion_metrics"]["under_rate"]
    )
    assert won["version"] == "3" and won["promoted"] == wins and won["champion"] == ("3" if wins else "1")


def test_train_forecaster_input_errors_name_the_path(settings):
    base = Lake(settings.lake_dir).curated_dir("features_1m") / "job=demo"
    with pytest.raises(FileNotFoundError, match=f"features_1m has no parquet files for job 'demo' under {base}"):
        train_forecaster.run(job="demo", settings=settings)
    _write(base / "date=2024-03-01" / "part-0.parquet", _features().iloc[:0].drop(columns=["job"]))
    with pytest.raises(ValueError, match=f"under {base} has no rows"):
        train_forecaster.run(job="demo", settings=settings)
    bad = base / "date=2024-03-01" / "part-0.parquet"
    _write(bad, _features().drop(columns=["job", "input_rate"]))
    with pytest.raises(ValueError, match=rf"file {bad} lacks column\(s\) \['input_rate'\]"):
        train_forecaster.run(job="demo", settings=settings)
    _write(bad, _features(hours=1.5).drop(columns=["job"]))
    with pytest.raises(ValueError, match="job=demo input_rate: 90 bins of 60s is too short"):
        train_forecaster.run(job="demo", settings=settings)
    with pytest.raises(ValueError, match="unknown forecaster candidate 'prophet'"):
        train_forecaster.run(job="demo", settings=settings, candidates=("prophet",))
    with pytest.raises(ValueError, match=r"none can be registered"):
        train_forecaster.run(
            job="demo", settings=Settings(var_dir=settings.var_dir, device="cpu"), candidates=("seasonal-naive",)
        )


def test_train_surrogate_promotes_on_the_newest_observations_held_out(settings, monkeypatch, capsys):
    base = Lake(settings.lake_dir).curated_dir("profiling_observations") / "job=demo"
    _write(base / "part-0.parquet", _observations(30, seed=1))
    first = train_surrogate.run(job="demo", settings=settings)
    assert (first["version"], first["promoted"], first["champion"]) == ("1", True, "1")
    assert first["metrics"]["observations"] == 30
    _check_logged_model_and_training_input(
        "flinktune-surrogate-demo", "1", "surrogate-demo-gp", "profiling_observations-demo", 30, base
    )
    assert first["metrics"]["loo_rmse.latency_ms"] < 0.5  # log space: within ~1.6x
    again = train_surrogate.run(job="demo", settings=settings)
    assert (again["version"], again["promoted"], again["champion"]) == ("2", False, "1")
    # The forecaster's promotion path: same tags, same reason form.
    tags = mlflow.MlflowClient().get_model_version("flinktune-surrogate-demo", "2").tags
    held = again["metrics"]["holdout_rmse.latency_ms"]
    assert tags["promotion"] == again["promotion"]
    assert again["promotion"].startswith(f"kept champion: held-out RMSE of log p95 latency {held:.3g} vs champion v1 ")
    assert again["promotion"].endswith("on the 6 newest of 30 profiling observations of job demo; finite metrics")
    assert tags["promotion_metric"] == "holdout_rmse.latency_ms"
    newer = _observations(10, seed=2)
    newer["ts_ms"] += 3_600_000  # profiled an hour later
    _write(base / "part-1.parquet", newer)
    monkeypatch.setenv("FLINKTUNE_VAR_DIR", str(settings.var_dir))
    monkeypatch.setenv("FLINKTUNE_DEVICE", "cpu")
    assert train_surrogate.main(["--job", "demo"]) == 0
    printed = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert (printed["version"], printed["promoted"], printed["champion"]) == ("3", True, "3")
    champion = registry.load_champion("flinktune-surrogate-demo")
    assert isinstance(champion, GPSurrogate) and champion.fit_info["latency_ms.points"] == 40
    space = ConfigSpace()
    X = np.array([space.normalise(c) for c in space.candidates()])
    pred = champion.predict(X, 40_000)
    p16 = np.array([c.parallelism for c in space.candidates()])
    assert np.median(pred.median("latency_ms")[p16 == 24]) < np.median(pred.median("latency_ms")[p16 == 8])


def test_train_surrogate_input_errors_name_file_and_row(settings):
    base = Lake(settings.lake_dir).curated_dir("profiling_observations") / "job=demo"
    with pytest.raises(FileNotFoundError, match=f"under {base}"):
        train_surrogate.run(job="demo", settings=settings)
    obs = _observations(10, seed=3)
    obs.loc[4, "parallelism"] = 64
    _write(base / "part-0.parquet", obs)
    with pytest.raises(
        ConfigError, match=r"part-0.parquet, row 4: parallelism=64 is outside the configuration space's range \[8, 24\]"
    ):
        train_surrogate.run(job="demo", settings=settings)
    obs.loc[4, "parallelism"] = 0
    _write(base / "part-0.parquet", obs)
    with pytest.raises(ConfigError, match=r"part-0.parquet, row 4: parallelism: 0 is outside the physical range"):
        train_surrogate.run(job="demo", settings=settings)
    _write(base / "part-0.parquet", _observations(2, seed=3))
    with pytest.raises(ValueError, match=r"profiling_observations job=demo: outcome 'latency_ms': 2 distinct"):
        train_surrogate.run(job="demo", settings=settings)


def test_candidates_needing_more_history_sit_the_round_out(settings):
    # 3 h of minutes: enough for TiDE (100 bins + holdout), not for Theta (230 bins).
    _write(
        Lake(settings.lake_dir).curated_dir("features_1m") / "job=demo" / "date=2024-03-01" / "part-0.parquet",
        _features(hours=3.0).drop(columns=["job"]),
    )
    out = train_forecaster.run(
        job="demo", settings=settings, candidates=("tide-quantile", "darts-theta"), n_epochs=1, stride_bins=5
    )
    assert out["skipped"] == ["darts-theta"] and out["best"] == "tide-quantile" and out["champion"] == "1"


def test_train_forecaster_chains_the_selection_when_asked_and_records_it(settings):
    base = Lake(settings.lake_dir).curated_dir("features_1m") / "job=demo"
    _write(base / "date=2024-03-01" / "part-0.parquet", _features().drop(columns=["job"]))
    with pytest.raises(ValueError, match="select_refits must be >= 1, got 0"):
        train_forecaster.run(job="demo", settings=settings, candidates=("darts-theta",), select_refits=0)
    out = train_forecaster.run(job="demo", settings=settings, candidates=("darts-theta",), stride_bins=2, select_refits=2)
    client = mlflow.MlflowClient()
    run_id = client.get_model_version("flinktune-forecaster-demo", out["version"]).run_id
    assert client.get_run(run_id).data.params["select_refits"] == "2" and out["metrics"]["origins"] > 0


def test_the_registered_champion_is_the_benchmarks_winner_on_the_same_trace(settings):
    from benchmarks.forecasting.forecasting import run_trace

    base = Lake(settings.lake_dir).curated_dir("features_1m") / "job=demo"
    feats = _features(hours=4.0, seed=4)
    _write(base / "date=2024-03-01" / "part-0.parquet", feats.drop(columns=["job"]))
    pool = ("peak-gbm", "darts-peak-linear", "darts-peak-ensemble")
    out = train_forecaster.run(job="demo", settings=settings, candidates=pool, stride_bins=3, select_refits=2)
    trace = pd.Series(feats["input_rate"].to_numpy(), index=pd.DatetimeIndex(feats["window_start"]))
    build = dict(bin_s=60, horizon_s=600, n_epochs=1, device="cpu", seed=0)
    rows = run_trace(
        {c: build_candidate(c, **build) for c in pool},
        trace,
        seed=0,
        workload="demo",
        select_start=pd.Timestamp(out["select_start"]),
        report_start=pd.Timestamp(out["report_start"]),
        stride_bins=3,
        select_refits=2,
    )
    bench = next(r for r in rows if r["model"] == "champion")
    assert out["best"] == bench["chosen"] and out["best_reason"] == bench["reason"]
    client = mlflow.MlflowClient()
    run = client.get_run(client.get_model_version("flinktune-forecaster-demo", out["version"]).run_id)
    assert run.data.params["candidate"] == bench["chosen"]
    assert (run.data.params["backtest_rule"], run.data.params["peak_rule"]) == (bench["rule"], bench["peak_rule"])
    assert run.data.tags["champion_rule"] == bench["reason"]
    assert run.data.metrics["peak_mae"] == pytest.approx(bench["peak_mae"], rel=1e-3)
    assert run.data.metrics["selection_peak_mae"] > 0 and "under_rate" in run.data.metrics


def test_train_surrogate_with_a_silent_mlflow_fails_within_seconds_in_one_line(tmp_path, monkeypatch, capsys):
    """One bounded attempt (FLINKTUNE_TIMEOUT_MLFLOW_*), not MLflow's 120 s x 7 retries; no password shown."""
    import socket
    import time

    for var in ("MLFLOW_HTTP_REQUEST_TIMEOUT", "MLFLOW_HTTP_REQUEST_MAX_RETRIES"):
        monkeypatch.setenv(var, "")  # restored after the test: configure() sets them
    uris = mlflow.get_tracking_uri(), mlflow.get_registry_uri()
    var = tmp_path / "var"
    _write(Lake(var / "lake").curated_dir("profiling_observations") / "job=demo" / "part-0.parquet", _observations(12, seed=1))
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(8)  # accepts, never answers
        uri = f"http://alice:S3CRETpw@127.0.0.1:{listener.getsockname()[1]}"
        for k, v in {"FLINKTUNE_VAR_DIR": str(var), "FLINKTUNE_DEVICE": "cpu", "FLINKTUNE_MLFLOW_TRACKING_URI": uri,
                     "FLINKTUNE_TIMEOUT_MLFLOW_REQUEST_S": "2", "FLINKTUNE_TIMEOUT_MLFLOW_RETRIES": "0"}.items():  # fmt: skip
            monkeypatch.setenv(k, v)
        t0 = time.monotonic()
        try:
            code = train_surrogate.main(["--job", "demo"])
        finally:
            mlflow.set_tracking_uri(uris[0])
            mlflow.set_registry_uri(uris[1])
        wall = time.monotonic() - t0
    err = capsys.readouterr().err
    assert code == 2 and wall < 30, (code, f"{wall:.0f} s", err)
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: python -m jobs.train_surrogate") and "S3CRETpw" not in err
