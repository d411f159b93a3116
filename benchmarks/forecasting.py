"""Backtest table of every forecaster on the twin's 18 h traces (the issue-5 yardstick).

Run: ``.venv/bin/python benchmarks/forecasting.py [--hours 18] [--train-hours 12] [--select-hours 6]
[--select-refits 3] [--epochs 20] [--seeds 7,8,9] [--models demeter-arima,peak-gbm]``; ``--quick`` is a
smoke run (an origin every 10 minutes, 2 epochs; the Demeter baseline keeps its published settings,
so it still dominates the time). For each seed and workload (ysb, tsw) the 1 s trace is binned to
minutes. Each model chooses its planning and peak rules on every origin of the ``--select-hours``
(6 h) before ``--train-hours`` (12 h), chaining forward: the span is cut into ``--select-refits``
parts (about 2 h each) and the model is fitted on everything before each part, so the rules rest on 351
origins forecast by models about as well informed as the report's. It is then refitted on the first
``--train-hours`` and forecasts the next 10 minutes at every origin after that, all of which are
reported (:func:`models.forecasting.backtest.backtest_select_then_report`). The Demeter
baseline reads the 1 s trace, as published; the others read minute bins.
Prints one JSON line per row as it goes, then a Markdown table of every row and, when Demeter ran,
a table of each model's peak MAE relative to Demeter's per seed with the mean over seeds.
"""

from __future__ import annotations

import argparse
import json

import numpy as np
import pandas as pd

from flinktune.twin.workload import generate_trace
from models.forecasting.backtest import backtest_select_then_report
from models.forecasting.darts_forecaster import DartsQuantileForecaster
from models.forecasting.demeter_arima import DemeterArimaForecaster
from models.forecasting.peak_forecaster import DirectPeakForecaster
from models.forecasting.seasonal_naive import SeasonalNaiveForecaster
from models.forecasting.series_prep import prepare_rate_series
from models.forecasting.statistical import StatisticalForecaster

__all__ = ["main", "COLUMNS", "ratio_table"]

COLUMNS = ["seed", "workload", "model", "rule", "peak_rule", "peak_mae", "raw_peak_mae", "peak_mase", "vs_demeter", "under_rate",
           "over_provisioning", "published_rule_under_rate", "fit_s", "predict_ms", "origins"]
_QUICK_STRIDE_BINS, _QUICK_EPOCHS = 10, 2


def _models(args, seed: int) -> dict:
    return {
        "demeter-arima": DemeterArimaForecaster(input_bin_s=1, seed=seed),
        "seasonal-naive": SeasonalNaiveForecaster(),
        "darts-ets": StatisticalForecaster(kind="ets"),
        "darts-theta": StatisticalForecaster(kind="theta"),
        "tide-quantile": DartsQuantileForecaster(n_epochs=args.epochs, device=args.device, seed=seed),
        "peak-gbm": DirectPeakForecaster(seed=seed),
    }


def _seeds(text: str) -> list[int]:
    try:
        seeds = [int(s) for s in text.split(",") if s.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"--seeds: expected comma-separated integers, got {text!r}") from None
    if not seeds:
        raise argparse.ArgumentTypeError("--seeds: give at least one seed")
    return seeds


def ratio_table(rows: list[dict]) -> str:
    """Markdown: per (workload, model), peak MAE / Demeter's for each seed, their mean, worst under-rate."""
    seeds = sorted({r["seed"] for r in rows})
    keys = list(dict.fromkeys((r["workload"], r["model"]) for r in rows))
    by = {(r["seed"], r["workload"], r["model"]): r for r in rows}
    lines = ["| workload | model | " + " | ".join(f"seed {s}" for s in seeds) + " | mean | max under_rate |",
             "|---|---|" + "---|" * (len(seeds) + 2)]
    for workload, model in keys:
        cells = [by.get((s, workload, model), {}).get("vs_demeter", float("nan")) for s in seeds]
        unders = [by[(s, workload, model)]["under_rate"] for s in seeds if (s, workload, model) in by]
        mean = float(np.mean(cells)) if cells and not np.isnan(cells).any() else float("nan")
        lines.append(f"| {workload} | {model} | " + " | ".join(f"{c:.3f}" for c in cells)
                     + f" | {mean:.3f} | {max(unders):.3f} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> list[dict]:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--hours", type=float, default=18.0)
    p.add_argument("--train-hours", type=float, default=12.0, help="report origins start here (the final fit's span)")
    p.add_argument("--select-hours", type=float, default=6.0,
                   help="span before --train-hours whose origins choose the rules (the first fit ends where it starts)")
    p.add_argument("--select-refits", type=int, default=3,
                   help="parts of the selection span, each forecast by a model fitted on everything before it")
    p.add_argument("--epochs", type=int, default=20)
    p.add_argument("--seed", type=int, default=None, help="one trace seed (same as --seeds N)")
    p.add_argument("--seeds", type=_seeds, default=None, help="comma-separated trace seeds (default 7)")
    p.add_argument("--stride-bins", type=int, default=1, help="minutes between backtest origins")
    p.add_argument("--quick", action="store_true",
                   help=f"smoke run: an origin every {_QUICK_STRIDE_BINS} minutes, {_QUICK_EPOCHS} epochs")
    p.add_argument("--device", default="cpu", choices=["cpu", "cuda", "auto"])
    p.add_argument("--workloads", default="ysb,tsw")
    p.add_argument("--models", default=None, help="comma-separated subset of model names")
    a = p.parse_args(argv)
    if a.seed is not None and a.seeds is not None:
        p.error("give --seed or --seeds, not both")
    seeds = a.seeds or [7 if a.seed is None else a.seed]
    if not 0 < a.select_hours < a.train_hours < a.hours:
        p.error(f"need 0 < --select-hours < --train-hours < --hours, got {a.select_hours}, {a.train_hours}, {a.hours}")
    if a.select_refits < 1:
        p.error(f"--select-refits must be >= 1, got {a.select_refits}")
    if a.quick:
        a.stride_bins, a.epochs = max(a.stride_bins, _QUICK_STRIDE_BINS), min(a.epochs, _QUICK_EPOCHS)
    wanted = a.models.split(",") if a.models else None
    unknown = set(wanted or []) - set(_models(a, 0))
    if unknown:
        p.error(f"--models: unknown {sorted(unknown)}; known: {sorted(_models(a, 0))}")
    rows = []
    for seed in seeds:
        for workload in a.workloads.split(","):
            raw = generate_trace(workload, a.hours, seed)
            series = prepare_rate_series(raw, bin_s=60).values
            report_start = series.index[0] + pd.Timedelta(hours=a.train_hours)
            select_start = report_start - pd.Timedelta(hours=a.select_hours)
            demeter_mae = None
            for name, model in _models(a, seed).items():
                if wanted and name not in wanted:
                    continue
                m = backtest_select_then_report(model, series, select_start=select_start, report_start=report_start,
                                                stride_bins=a.stride_bins, select_refits=a.select_refits,
                                                inputs=raw if name == "demeter-arima" else None).metrics
                if name == "demeter-arima":
                    demeter_mae = m["peak_mae"]
                m["vs_demeter"] = m["peak_mae"] / demeter_mae if demeter_mae else float("nan")
                rows.append({"seed": seed, "workload": workload, "model": name,
                             **{k: (round(v, 4) if isinstance(v, float) else v) for k, v in m.items()}})
                print(json.dumps(rows[-1]), flush=True)
    print("| " + " | ".join(COLUMNS) + " |\n|" + "---|" * len(COLUMNS))
    for r in rows:
        print("| " + " | ".join(str(r.get(c, "")) for c in COLUMNS) + " |")
    if any(r["model"] == "demeter-arima" for r in rows):
        print("\nPeak MAE relative to demeter-arima (per seed, mean over seeds):\n" + ratio_table(rows))
    return rows


if __name__ == "__main__":
    main()
