"""Backtest table of the forecasters on the twin's generated traces.

Run: ``.venv/bin/python benchmarks/forecasting.py [--hours 18] [--train-hours 12] [--epochs 20]``.
For each workload (ysb, tsw) the 1 s trace is binned to minutes, each model is fitted on the
first ``--train-hours`` and backtested on the rest with ``jobs.train_forecaster.backtest``
(rolling origins every 10 minutes: 10-minute peak error, p90 peak coverage, how often the
planned rate max-mean x 1.10 fell short). Prints a Markdown table and one JSON line per row.
"""

from __future__ import annotations

import argparse
import json
import time

import pandas as pd

from flinktune.twin.workload import generate_trace
from jobs.train_forecaster import backtest
from models.forecasting.darts_forecaster import DartsQuantileForecaster
from models.forecasting.seasonal_naive import SeasonalNaiveForecaster
from models.forecasting.series_prep import prepare_rate_series

__all__ = ["main"]


def main(argv: list[str] | None = None) -> list[dict]:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--hours", type=float, default=18.0)
    p.add_argument("--train-hours", type=float, default=12.0)
    p.add_argument("--epochs", type=int, default=20)
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--device", default="cpu", choices=["cpu", "cuda", "auto"])
    a = p.parse_args(argv)
    rows = []
    for workload in ("ysb", "tsw"):
        series = prepare_rate_series(generate_trace(workload, a.hours, a.seed), bin_s=60).values
        split = series.index[0] + pd.Timedelta(hours=a.train_hours)
        train = series[series.index < split]
        naive = SeasonalNaiveForecaster().fit(train)
        models = {
            "tide-quantile": DartsQuantileForecaster(n_epochs=a.epochs, device=a.device, seed=a.seed),
            "seasonal-naive": naive,
        }
        for name, model in models.items():
            start = time.perf_counter()
            if model is not naive:
                model.fit(train)
            fit_s = time.perf_counter() - start
            start = time.perf_counter()
            m = backtest(model, naive, series, split, 600)
            rows.append({"workload": workload, "model": name, "fit_s": round(fit_s, 2),
                         "backtest_s": round(time.perf_counter() - start, 2),
                         **{k: round(v, 4) for k, v in m.items()}})
    cols = ["workload", "model", "fit_s", "backtest_s", "peak_mae", "peak_mae_ratio", "p90_peak_coverage",
            "planned_rate_shortfall", "backtest_origins"]
    print("| " + " | ".join(cols) + " |\n|" + "---|" * len(cols))
    for r in rows:
        print("| " + " | ".join(str(r[c]) for c in cols) + " |")
    for r in rows:
        print(json.dumps(r))
    return rows


if __name__ == "__main__":
    main()
