"""The forecaster candidates of the retraining run and the history they train on. Use
:data:`CANDIDATES` and :func:`build_candidate` for a fresh model by name (the retraining run, the
forecasting benchmark, the tests), :func:`read_rate_history` for a job's per-minute input rate from
the curated ``features_1m`` dataset.
"""

from __future__ import annotations

import math

import pandas as pd
import pyarrow.parquet as pq

from flinktune.lake import Lake
from models.forecasting.base import ForecastingModel

__all__ = ["CANDIDATES", "DATASET", "build_candidate", "read_rate_history"]

#: The curated dataset the forecasters train on (per-minute input rate).
DATASET = "features_1m"
#: Default candidates: the benchmark's champion pool (``benchmarks/forecasting.py`` ``CHAMPION_CANDIDATES``),
#: TiDE and Theta (they need less history than the peak models' covariates: with a short history, such as
#: the demo's minimum of 3 h, they are what can be trained) and the seasonal-naive yardstick. The Demeter
#: baseline ("demeter-arima", ~1-2 min on 2 cores) is opt-in: the benchmark measures it, and the scheduled
#: retrain stays fast.
CANDIDATES: tuple[str, ...] = (
    "peak-gbm",
    "darts-peak-linear",
    "darts-peak-hgb",
    "darts-peak-ensemble",
    "tide-quantile",
    "darts-theta",
    "seasonal-naive",
)


def read_rate_history(lake: Lake, job: str) -> pd.Series:
    """``input_rate`` of ``job`` from curated ``features_1m`` as a UTC-indexed series, sorted.

    Raises FileNotFoundError (no files) or ValueError (empty, missing columns) naming the path.
    """
    base = lake.curated_job_dir(DATASET, job)
    files = lake.dataset_files(DATASET, job)
    if not files:
        raise FileNotFoundError(
            f"dataset {DATASET} has no parquet files for job {job!r} under {base}; run jobs.etl_features first"
        )
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


def build_candidate(name: str, *, bin_s: int, horizon_s: int, n_epochs: int, device: str, seed: int) -> ForecastingModel:
    """A fresh forecaster for candidate ``name`` (one of :data:`CANDIDATES`, or ``darts-ets``)."""
    from models.forecasting.darts_forecaster import DartsQuantileForecaster
    from models.forecasting.darts_peak import DartsPeakForecaster
    from models.forecasting.demeter_arima import DemeterArimaForecaster
    from models.forecasting.peak_ensemble import DartsPeakEnsemble
    from models.forecasting.peak_forecaster import DirectPeakForecaster
    from models.forecasting.seasonal_naive import SeasonalNaiveForecaster
    from models.forecasting.statistical import StatisticalForecaster

    if name == "tide-quantile":
        return DartsQuantileForecaster(
            bin_s=bin_s, output_bins=math.ceil(horizon_s / bin_s), n_epochs=n_epochs, device=device, seed=seed
        )
    if name == "peak-gbm":
        return DirectPeakForecaster(bin_s=bin_s, default_horizon_s=horizon_s, seed=seed)
    if name in ("darts-peak-linear", "darts-peak-hgb"):
        # The job reads curated bins, so the model reads them at their own step.
        return DartsPeakForecaster(
            estimator=name.rsplit("-", 1)[1],
            bin_s=bin_s,
            input_bin_s=bin_s,
            default_horizon_s=horizon_s,
            max_gap_bins=5,
            seed=seed,
        )
    if name == "darts-peak-ensemble":
        return DartsPeakEnsemble(bin_s=bin_s, input_bin_s=bin_s, default_horizon_s=horizon_s, max_gap_bins=5, seed=seed)
    if name in ("darts-theta", "darts-ets"):
        return StatisticalForecaster(kind=name.split("-")[1], bin_s=bin_s, default_horizon_s=horizon_s)
    if name == "seasonal-naive":
        return SeasonalNaiveForecaster(bin_s=bin_s, default_horizon_s=horizon_s)
    if name == "demeter-arima":
        return DemeterArimaForecaster(input_bin_s=bin_s, bin_s=bin_s, seed=seed)
    raise ValueError(f"unknown forecaster candidate {name!r}; known: {sorted((*CANDIDATES, 'darts-ets'))}")
