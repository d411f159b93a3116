"""Backtest table of every forecaster on the twin's 18 h traces (the issue-5 yardstick).

Run: ``.venv/bin/python benchmarks/forecasting.py [--hours 18] [--train-hours 12] [--epochs 20]``
(``--quick`` for a smoke run). For each workload (ysb, tsw) the 1 s trace is binned to minutes;
each model is fitted on the first ``--train-hours`` and forecasts the next 10 minutes at every
minute after that (:mod:`models.forecasting.backtest`: rule chosen on the first third of the
origins, metrics on the rest). The Demeter baseline reads the 1 s trace, as published; the others
read minute bins. Prints a Markdown table (plus each best model's peak MAE relative to Demeter's)
and one JSON line per row.
"""

from __future__ import annotations

import argparse
import json

import pandas as pd

from flinktune.twin.workload import generate_trace
from models.forecasting.backtest import BacktestWindow, run_backtest, summarize
from models.forecasting.darts_forecaster import DartsQuantileForecaster
from models.forecasting.demeter_arima import DemeterArimaForecaster
from models.forecasting.seasonal_naive import SeasonalNaiveForecaster
from models.forecasting.series_prep import prepare_rate_series
from models.forecasting.statistical import StatisticalForecaster

__all__ = ["main", "COLUMNS"]

COLUMNS = ["workload", "model", "rule", "peak_rule", "peak_mae", "raw_peak_mae", "peak_mase", "vs_demeter", "under_rate", "over_provisioning",
           "published_rule_under_rate", "fit_s", "predict_ms", "origins"]


def _models(args) -> dict:
    return {
        "demeter-arima": DemeterArimaForecaster(input_bin_s=1, seed=args.seed),
        "seasonal-naive": SeasonalNaiveForecaster(),
        "darts-ets": StatisticalForecaster(kind="ets"),
        "darts-theta": StatisticalForecaster(kind="theta"),
        "tide-quantile": DartsQuantileForecaster(n_epochs=args.epochs, device=args.device, seed=args.seed),
    }


def main(argv: list[str] | None = None) -> list[dict]:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--hours", type=float, default=18.0)
    p.add_argument("--train-hours", type=float, default=12.0)
    p.add_argument("--epochs", type=int, default=20)
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--stride-bins", type=int, default=1, help="minutes between backtest origins")
    p.add_argument("--device", default="cpu", choices=["cpu", "cuda", "auto"])
    p.add_argument("--workloads", default="ysb,tsw")
    p.add_argument("--models", default=None, help="comma-separated subset of model names")
    a = p.parse_args(argv)
    rows = []
    for workload in a.workloads.split(","):
        raw = generate_trace(workload, a.hours, a.seed)
        series = prepare_rate_series(raw, bin_s=60).values
        window = BacktestWindow(series, series.index[0] + pd.Timedelta(hours=a.train_hours), 600, a.stride_bins)
        demeter_mae = None
        for name, model in _models(a).items():
            if a.models and name not in a.models.split(","):
                continue
            result = run_backtest(model, window, inputs=raw if name == "demeter-arima" else None)
            m = summarize(result)
            if name == "demeter-arima":
                demeter_mae = m["peak_mae"]
            m["vs_demeter"] = m["peak_mae"] / demeter_mae if demeter_mae else float("nan")
            rows.append({"workload": workload, "model": name,
                         **{k: (round(v, 4) if isinstance(v, float) else v) for k, v in m.items()}})
            print(json.dumps(rows[-1]), flush=True)
    print("| " + " | ".join(COLUMNS) + " |\n|" + "---|" * len(COLUMNS))
    for r in rows:
        print("| " + " | ".join(str(r.get(c, "")) for c in COLUMNS) + " |")
    return rows


if __name__ == "__main__":
    main()
