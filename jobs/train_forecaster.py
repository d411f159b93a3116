"""Train the input-rate forecaster of one job, backtest it, register it in MLflow, promote it.

Reads the curated ``features_1m`` dataset (``<lake>/curated/features_1m/job=<job>/**.parquet``,
columns ``window_start``, ``input_rate``), holds out the latest part of the history, and compares
the darts model with seasonal naive on it (rolling origins every horizon): the error of the
forecast peak of each ``forecast_horizon_s`` window (``peak_mae``, max bin mean vs true max bin),
its ratio to naive's (``peak_mae_ratio``, scale-free, the promotion metric, lower is better), how
often the p90 peak covers the true peak, and how often the planned rate (max mean x 1.10) fell
short. The registered model is then refit on the whole history.

``python -m jobs.train_forecaster --job demo`` prints a one-line JSON summary.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow.parquet as pq

from flinktune.lake import Lake
from flinktune.settings import Settings, load_settings

__all__ = ["run", "main", "read_rate_history", "backtest", "PROMOTION_METRIC"]

DATASET = "features_1m"
PROMOTION_METRIC = "peak_mae_ratio"


def read_rate_history(lake: Lake, job: str) -> pd.Series:
    """``input_rate`` of ``job`` from curated ``features_1m`` as a UTC-indexed series, sorted.

    Raises FileNotFoundError (no files) or ValueError (empty, missing columns) naming the path.
    """
    base = lake.curated_dir(DATASET) / f"job={job}"
    files = sorted(base.rglob("*.parquet")) if base.exists() else []
    if not files:
        raise FileNotFoundError(f"dataset {DATASET} has no parquet files for job {job!r} under {base}; run jobs.etl_features first")
    frames = []
    for f in files:
        names = pq.read_schema(f).names
        missing = [c for c in ("window_start", "input_rate") if c not in names]
        if missing:
            raise ValueError(f"dataset {DATASET}: file {f} lacks column(s) {missing}")
        frames.append(pq.read_table(f, columns=["window_start", "input_rate"]).to_pandas())
    df = pd.concat(frames, ignore_index=True)
    if df.empty:
        raise ValueError(f"dataset {DATASET} for job {job!r} under {base} has no rows")
    ts = pd.to_datetime(df["window_start"])
    ts = ts.dt.tz_localize("UTC") if ts.dt.tz is None else ts.dt.tz_convert("UTC")
    return pd.Series(df["input_rate"].astype("float64").to_numpy(), index=pd.DatetimeIndex(ts), name="input_rate").sort_index()


def backtest(model: Any, baseline: Any, series: pd.Series, split: pd.Timestamp, horizon_s: int) -> dict[str, float]:
    """Rolling-origin holdout after ``split``: one origin per horizon window; models are already fitted.

    Series must be in the models' bins. Returns peak errors of ``model`` and ``baseline``, their
    ratio, the p90 peak coverage and the planned-rate shortfall frequency of ``model``.
    """
    from models.forecasting.planning import planned_rate

    bin_s = model.bin_s
    n = math.ceil(horizon_s / bin_s)
    times = series.index
    origins = [i for i in range(int(np.searchsorted(times, split)), len(series) - n + 1, n)]
    if not origins:
        raise ValueError(f"backtest: no complete {horizon_s}s window after {split.isoformat()}")
    err, err_naive, covered, short = [], [], [], []
    for i in origins:
        history, truth = series.iloc[:i], series.iloc[i : i + n].to_numpy()
        fc, fc_naive = model.predict(history, horizon_s), baseline.predict(history, horizon_s)
        peak = float(truth.max())
        err.append(abs(fc.peak(None) - peak))
        err_naive.append(abs(fc_naive.peak(None) - peak))
        covered.append(peak <= fc.peak(0.9))
        short.append(peak > planned_rate(fc, "max_mean_x1.10"))
    mae, mae_naive = float(np.mean(err)), float(np.mean(err_naive))
    return {
        "peak_mae": mae,
        "naive_peak_mae": mae_naive,
        "peak_mae_ratio": mae / mae_naive if mae_naive > 0 else (0.0 if mae == 0 else float("inf")),
        "p90_peak_coverage": float(np.mean(covered)),
        "planned_rate_shortfall": float(np.mean(short)),
        "backtest_origins": float(len(origins)),
    }


def _plot(series: pd.Series, model: Any, split: pd.Timestamp, horizon_s: int):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(10, 3.5))
    ax.plot(series.index, series.to_numpy(), lw=0.8, color="black", label="input rate")
    n = math.ceil(horizon_s / model.bin_s)
    start = int(np.searchsorted(series.index, split))
    for k, i in enumerate(range(start, len(series) - n + 1, n)):
        fc = model.predict(series.iloc[:i], horizon_s).to_frame()
        ax.fill_between(fc["bin_start"], fc["q0.1"], fc["q0.9"], color="tab:blue", alpha=0.25, label="p10-p90" if k == 0 else None)
        ax.plot(fc["bin_start"], fc["q0.5"], color="tab:blue", lw=1, label="p50" if k == 0 else None)
    ax.axvline(split, color="grey", ls="--", lw=0.8)
    ax.set_ylabel("rec/s")
    ax.legend(loc="upper left")
    fig.tight_layout()
    return fig


def run(*, job: str, settings: Settings | None = None, n_epochs: int = 20, holdout_frac: float = 0.2, seed: int = 0) -> dict:
    """Train, backtest, register ``flinktune-forecaster-<job>`` and promote it when better."""
    from models import registry
    from models.forecasting.darts_forecaster import DartsQuantileForecaster
    from models.forecasting.pyfunc import ForecasterPyfunc
    from models.forecasting.seasonal_naive import SeasonalNaiveForecaster
    from models.forecasting.series_prep import prepare_rate_series
    from models.forecasting.types import ForecastInputError

    if not 0 < holdout_frac < 1:
        raise ValueError(f"holdout_frac must be in (0, 1), got {holdout_frac}")
    settings = settings or load_settings()
    horizon_s, bin_s = settings.forecast_horizon_s, settings.forecast_bin_s
    raw = read_rate_history(Lake(settings.lake_dir), job)
    where = f"dataset {DATASET} job={job} input_rate"
    model = DartsQuantileForecaster(bin_s=bin_s, output_bins=math.ceil(horizon_s / bin_s), n_epochs=n_epochs,
                                    device=settings.device, seed=seed)
    series = prepare_rate_series(raw, bin_s=bin_s, max_gap_bins=model.max_gap_bins, min_bins=1, where=where).values
    n_hold = max(model.output_bins, int(len(series) * holdout_frac))
    if len(series) - n_hold < model.min_fit_bins:
        raise ForecastInputError(
            f"{where}: {len(series)} bins of {bin_s}s is too short to train ({model.min_fit_bins} bins) "
            f"and hold out {n_hold} bins for the backtest"
        )
    split = series.index[len(series) - n_hold]
    t0 = time.perf_counter()
    model.fit(series.iloc[: len(series) - n_hold])
    baseline = SeasonalNaiveForecaster(bin_s=bin_s, default_horizon_s=horizon_s).fit(series.iloc[: len(series) - n_hold])
    metrics = backtest(model, baseline, series, split, horizon_s)
    fig = _plot(series, model, split, horizon_s)
    model.fit(series)  # the registered model sees the whole history
    metrics.update(train_bins=float(len(series)), fit_seconds=time.perf_counter() - t0)
    name = f"flinktune-forecaster-{job}"
    registry.configure(settings.mlflow_tracking_uri, settings.mlflow_artifact_root)
    from mlflow.models import infer_signature

    example = pd.DataFrame({"ts": series.index[-model.input_bins:].asi8 // 10**6, "value": series.iloc[-model.input_bins:].to_numpy()})
    signature = infer_signature(example, model.predict(series, horizon_s).to_frame(), params={"horizon_s": horizon_s})
    with tempfile.TemporaryDirectory(prefix="flinktune-forecaster-") as tmp:
        model_dir = model.save(Path(tmp) / "model")
        version = registry.log_and_register(
            name,
            ForecasterPyfunc(horizon_s=horizon_s),
            params={"job": job, "model": model.name, **model.params(), "horizon_s": horizon_s, "holdout_frac": holdout_frac,
                    "history_start": series.index[0].isoformat(), "history_end": series.index[-1].isoformat()},
            metrics=metrics,
            artifacts={"model": str(model_dir)},
            files={"backtest": fig},
            experiment=name,
            pip_requirements=["mlflow==3.17.2", "darts==0.48.1", "torch==2.13.0"],
            signature=signature,
        )
    import matplotlib.pyplot as plt

    plt.close(fig)
    promoted = registry.promote_if_better(name, version, PROMOTION_METRIC, margin=0.0, lower_is_better=True)
    return {"model_name": name, "version": version, "promoted": promoted,
            "champion": registry.champion_version(name), "metrics": metrics}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m jobs.train_forecaster", description=__doc__.splitlines()[0])
    parser.add_argument("--job", required=True, help="job name (curated features_1m partition job=<job>)")
    parser.add_argument("--epochs", type=int, default=20, help="training epochs (default 20)")
    parser.add_argument("--holdout-frac", type=float, default=0.2, help="share of history held out for the backtest")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    summary = run(job=args.job, n_epochs=args.epochs, holdout_frac=args.holdout_frac, seed=args.seed)
    print(json.dumps(summary, sort_keys=True, default=float))
    return 0


if __name__ == "__main__":
    sys.exit(main())
