"""Backtest table of every forecaster on real traces and the twin's 18 h traces.

Run: ``.venv/bin/python -m benchmarks.forecasting.forecasting [--trace FILE ...] [--hours 18] [--train-hours 12]
[--select-hours 6] [--select-refits 3] [--epochs 20] [--seeds 7,8,9] [--workloads ysb,tsw]
[--models demeter-arima,seasonal-naive,peak-gbm,darts-peak-linear,darts-peak-hgb,darts-peak-ensemble]``; ``--quick`` is a
smoke run (an origin every 10 minutes, 2 epochs; the Demeter baseline keeps its published settings,
so it still dominates the time).

Inputs: ``--trace FILE`` (repeatable) backtests a recorded trace (``timestamp,value`` or
``timestamp|value``, :func:`flinktune.twin.workload.load_trace_csv`) over its whole length, with
the same rules for any trace: report its last third, choose the rules on the third before (unless
``--train-hours`` / ``--select-hours`` are given, counted from the trace's start). Its rows are
labelled with the file's stem as workload, once with the first seed. Generated twin traces
(``--workloads``, default ysb,tsw, or none when a trace is given without ``--workloads``) run per
seed over ``--hours``. Every trace is binned to minutes for the truth. Each model chooses its
planning and peak rules on every origin of the ``--select-hours`` (6 h) before ``--train-hours``
(12 h), chaining forward: the span is cut into ``--select-refits`` parts (about 2 h each) and the
model is fitted on everything before each part, so the rules rest on 351 origins forecast by
models about as well informed as the report's. It is then refitted on the first ``--train-hours``
and forecasts the next 10 minutes at every origin after that, all of which are reported
(:func:`models.forecasting.backtest.backtest_select_then_report`). The Demeter baseline reads
the 1 s trace, as published, and so do the darts peak models (on 10 s bins); the others read
minute bins.

``--peak-n-se 1`` / ``--planning-z 1`` turn on the rule choice's guards against selection optimism
(:func:`models.forecasting.backtest.choose_rules`; off by default); ``--direct-peak-factor`` lets the models that forecast the peak directly
choose a peak factor too (off by default: they keep the plain peak,
:data:`models.forecasting.backtest.DIRECT_PEAK_PLAIN`); ``--save-backtests FILE`` keeps every backtest so that
``benchmarks/forecasting/forecasting_rules.py FILE`` re-chooses the rules on the same forecasts.

The ``champion`` row is what the retraining job would register from the champion candidates
(peak-gbm, darts-peak-linear, darts-peak-hgb, darts-peak-ensemble: those run):
:func:`models.forecasting.champion.choose_champion` on the selection span only, with the chosen
model's report metrics and its name in ``chosen``.
Prints one JSON line per row as it goes, then a Markdown table of every row and, when Demeter ran,
a table of each model's peak MAE relative to Demeter's per seed with the mean over seeds.
"""

from __future__ import annotations

import argparse
import json
import pickle
from pathlib import Path

import numpy as np
import pandas as pd

from flinktune.twin.workload import TraceError, generate_trace, load_trace_csv
from models.forecasting.backtest import backtest_select_then_report
from models.forecasting.champion import choose_champion
from models.forecasting.darts_forecaster import DartsQuantileForecaster
from models.forecasting.darts_peak import DartsPeakForecaster
from models.forecasting.demeter_arima import DemeterArimaForecaster
from models.forecasting.peak_ensemble import DartsPeakEnsemble
from models.forecasting.peak_forecaster import DirectPeakForecaster
from models.forecasting.seasonal_naive import SeasonalNaiveForecaster
from models.forecasting.series_prep import prepare_rate_series
from models.forecasting.statistical import StatisticalForecaster

__all__ = ["CHAMPION_CANDIDATES", "COLUMNS", "main", "ratio_table", "run_trace"]

COLUMNS = [
    "seed",
    "workload",
    "model",
    "chosen",
    "rule",
    "peak_rule",
    "peak_mae",
    "raw_peak_mae",
    "peak_mase",
    "vs_demeter",
    "under_rate",
    "over_provisioning",
    "published_rule_under_rate",
    "fit_s",
    "predict_ms",
    "origins",
]
_QUICK_STRIDE_BINS, _QUICK_EPOCHS = 10, 2
#: Models that read the 1 s trace rather than its minute bins.
_READS_RAW = ("demeter-arima", "darts-peak-linear", "darts-peak-hgb", "darts-peak-ensemble")
#: The candidates the champion row chooses from (the retraining job's registrable peak models).
CHAMPION_CANDIDATES = ("peak-gbm", "darts-peak-linear", "darts-peak-hgb", "darts-peak-ensemble")


def _models(args, seed: int) -> dict:
    return {
        "demeter-arima": DemeterArimaForecaster(input_bin_s=1, seed=seed),
        "seasonal-naive": SeasonalNaiveForecaster(),
        "darts-ets": StatisticalForecaster(kind="ets"),
        "darts-theta": StatisticalForecaster(kind="theta"),
        "tide-quantile": DartsQuantileForecaster(n_epochs=args.epochs, device=args.device, seed=seed),
        "peak-gbm": DirectPeakForecaster(seed=seed),
        "darts-peak-linear": DartsPeakForecaster(estimator="linear", input_bin_s=10, seed=seed),
        "darts-peak-hgb": DartsPeakForecaster(estimator="hgb", input_bin_s=10, seed=seed),
        "darts-peak-ensemble": DartsPeakEnsemble(input_bin_s=10, seed=seed),
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
    lines = [
        "| workload | model | " + " | ".join(f"seed {s}" for s in seeds) + " | mean | max under_rate |",
        "|---|---|" + "---|" * (len(seeds) + 2),
    ]
    for workload, model in keys:
        cells = [by.get((s, workload, model), {}).get("vs_demeter", float("nan")) for s in seeds]
        unders = [by[(s, workload, model)]["under_rate"] for s in seeds if (s, workload, model) in by]
        present = [c for s, c in zip(seeds, cells) if (s, workload, model) in by]  # a trace runs on one seed
        mean = float(np.mean(present)) if present and not np.isnan(present).any() else float("nan")
        lines.append(
            f"| {workload} | {model} | "
            + " | ".join("" if (s, workload, model) not in by else f"{c:.3f}" for s, c in zip(seeds, cells))
            + f" | {mean:.3f} | {max(unders):.3f} |"
        )
    return "\n".join(lines)


def run_trace(
    models: dict,
    raw: pd.Series,
    *,
    seed: int,
    workload: str,
    select_start: pd.Timestamp | None = None,
    report_start: pd.Timestamp | None = None,
    train_hours: float | None = None,
    select_hours: float | None = None,
    stride_bins: int = 1,
    select_refits: int = 3,
    planning_z: float | None = None,
    peak_n_se: float | None = None,
    direct_peak_plain: bool | None = None,
    keep: dict | None = None,
) -> list[dict]:
    """Every model of ``models`` (name -> fresh forecaster) on one trace, then the champion row.

    ``raw`` is the trace (rec/s, tz-aware, any step); the truth is its minute bins. The spans are
    ``select_start`` / ``report_start`` or hours from the start. ``planning_z`` / ``peak_n_se`` /
    ``direct_peak_plain``: as in :func:`models.forecasting.backtest.choose_rules`. ``keep`` (a dict) receives
    ``(workload, seed) -> {model: SelectedBacktest}``. Returns the rows as printed.
    """
    series = prepare_rate_series(raw, bin_s=60).values
    if report_start is None:
        report_start = series.index[0] + pd.Timedelta(hours=train_hours)
        select_start = report_start - pd.Timedelta(hours=select_hours)
    demeter_mae, rows, backtests = None, [], {}
    for name, model in models.items():
        bt = backtest_select_then_report(
            model,
            series,
            select_start=select_start,
            report_start=report_start,
            stride_bins=stride_bins,
            select_refits=select_refits,
            inputs=raw if name in _READS_RAW else None,
            planning_z=planning_z,
            peak_n_se=peak_n_se,
            direct_peak_plain=direct_peak_plain,
        )
        backtests[name] = bt
        m = dict(bt.metrics)
        if name == "demeter-arima":
            demeter_mae = m["peak_mae"]
        m["vs_demeter"] = m["peak_mae"] / demeter_mae if demeter_mae else float("nan")
        rows.append(
            {
                "seed": seed,
                "workload": workload,
                "model": name,
                **{k: (round(v, 4) if isinstance(v, float) else v) for k, v in m.items()},
            }
        )
        print(json.dumps(rows[-1]), flush=True)
    pool = [c for c in CHAMPION_CANDIDATES if c in backtests]
    if pool:
        choice = choose_champion({c: backtests[c] for c in pool}, planning_z=planning_z)
        won = next(r for r in rows if r["model"] == choice.name)
        rows.append({**won, "model": "champion", "chosen": choice.name, "reason": choice.reason})
        print(json.dumps(rows[-1]), flush=True)
    if keep is not None:
        keep[(workload, seed)] = backtests
    return rows


def main(argv: list[str] | None = None) -> list[dict]:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument(
        "--trace",
        action="append",
        default=[],
        metavar="FILE",
        help="a recorded trace (timestamp,value); repeatable; backtested over its whole length",
    )
    p.add_argument("--hours", type=float, default=18.0, help="length of the generated traces")
    p.add_argument(
        "--train-hours",
        type=float,
        default=None,
        help="report origins start here (the final fit's span); default 2/3 of the trace",
    )
    p.add_argument(
        "--select-hours",
        type=float,
        default=None,
        help="span before --train-hours whose origins choose the rules (the first fit ends where it "
        "starts); default 1/3 of the trace",
    )
    p.add_argument(
        "--select-refits",
        type=int,
        default=3,
        help="parts of the selection span, each forecast by a model fitted on everything before it",
    )
    p.add_argument("--epochs", type=int, default=20)
    p.add_argument("--seed", type=int, default=None, help="one trace seed (same as --seeds N)")
    p.add_argument("--seeds", type=_seeds, default=None, help="comma-separated trace seeds (default 7)")
    p.add_argument("--stride-bins", type=int, default=1, help="minutes between backtest origins")
    p.add_argument(
        "--quick", action="store_true", help=f"smoke run: an origin every {_QUICK_STRIDE_BINS} minutes, {_QUICK_EPOCHS} epochs"
    )
    p.add_argument("--device", default="cpu", choices=["cpu", "cuda", "auto"])
    p.add_argument(
        "--workloads", default=None, help="generated twin traces (default ysb,tsw; none when --trace is given; 'none' for none)"
    )
    p.add_argument("--models", default=None, help="comma-separated subset of model names")
    p.add_argument(
        "--planning-z",
        type=float,
        default=None,
        help="z of the under-forecast upper bound the planning rule is chosen on (default "
        "models.forecasting.backtest.PLANNING_Z; 0: the point estimate)",
    )
    p.add_argument(
        "--peak-n-se",
        type=float,
        default=None,
        help="standard errors a peak factor must beat the plain peak by (default PEAK_RULE_N_SE; 0: the plain minimum)",
    )
    p.add_argument(
        "--direct-peak-factor",
        action="store_true",
        help="let models that forecast the peak directly choose a peak factor too ("
        "default: they keep the plain peak, models.forecasting.backtest.DIRECT_PEAK_PLAIN)",
    )
    p.add_argument(
        "--save-backtests",
        default=None,
        metavar="FILE",
        help="pickle every backtest ({(workload, seed): {model: SelectedBacktest}}) to FILE, for "
        "benchmarks/forecasting/forecasting_rules.py to re-choose the rules on the same forecasts",
    )
    a = p.parse_args(argv)
    if a.seed is not None and a.seeds is not None:
        p.error("give --seed or --seeds, not both")
    seeds = a.seeds or [7 if a.seed is None else a.seed]
    if a.select_refits < 1:
        p.error(f"--select-refits must be >= 1, got {a.select_refits}")
    if a.quick:
        a.stride_bins, a.epochs = max(a.stride_bins, _QUICK_STRIDE_BINS), min(a.epochs, _QUICK_EPOCHS)
    wanted = a.models.split(",") if a.models else None
    unknown = set(wanted or []) - set(_models(a, 0))
    if unknown:
        p.error(f"--models: unknown {sorted(unknown)}; known: {sorted(_models(a, 0))}")
    workloads = a.workloads if a.workloads is not None else ("" if a.trace else "ysb,tsw")
    workloads = [w for w in workloads.split(",") if w and w != "none"]

    def spans(hours: float, what: str) -> tuple[float, float]:
        train = a.train_hours if a.train_hours is not None else hours * 2 / 3
        select = a.select_hours if a.select_hours is not None else hours / 3
        if not 0 < select < train < hours:
            p.error(f"need 0 < --select-hours < --train-hours < {what}, got {select:g}, {train:g}, {hours:g} h")
        return train, select

    traces = []
    for path in a.trace:
        try:
            raw = load_trace_csv(path)
        except TraceError as exc:
            p.error(f"--trace: {exc}")
        hours = (raw.index[-1] - raw.index[0]).total_seconds() / 3600 + 1 / 3600
        traces.append((Path(path).stem, raw, *spans(hours, f"the length of trace {path}")))
    gen_spans = spans(a.hours, "--hours") if workloads else None

    def chosen(seed: int) -> dict:
        return {n: m for n, m in _models(a, seed).items() if not wanted or n in wanted}

    kept: dict = {}
    common = dict(
        stride_bins=a.stride_bins,
        select_refits=a.select_refits,
        planning_z=a.planning_z,
        peak_n_se=a.peak_n_se,
        direct_peak_plain=False if a.direct_peak_factor else None,
        keep=kept,
    )

    def save() -> None:  # after every trace, so a cut-short run keeps what it finished
        if a.save_backtests:
            with open(a.save_backtests, "wb") as fh:
                pickle.dump(kept, fh)

    rows = []
    for workload, raw, train, select in traces:
        rows += run_trace(
            chosen(seeds[0]), raw, seed=seeds[0], workload=workload, train_hours=train, select_hours=select, **common
        )
        save()
    for seed in seeds:
        for workload in workloads:
            assert gen_spans is not None  # set whenever there are workloads
            rows += run_trace(
                chosen(seed),
                generate_trace(workload, a.hours, seed),
                seed=seed,
                workload=workload,
                train_hours=gen_spans[0],
                select_hours=gen_spans[1],
                **common,
            )
            save()
    print("| " + " | ".join(COLUMNS) + " |\n|" + "---|" * len(COLUMNS))
    for r in rows:
        print("| " + " | ".join(str(r.get(c, "")) for c in COLUMNS) + " |")
    if any(r["model"] == "demeter-arima" for r in rows):
        print("\nPeak MAE relative to demeter-arima (per seed, mean over seeds):\n" + ratio_table(rows))
    for r in rows:
        if r["model"] == "champion":
            print(f"champion {r['workload']} seed {r['seed']}: {r['chosen']}: {r['reason']}")
    if a.save_backtests:
        print(f"backtests saved to {a.save_backtests}")
    return rows


if __name__ == "__main__":
    main()
