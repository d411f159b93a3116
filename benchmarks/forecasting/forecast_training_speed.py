"""Training time of the torch forecaster (TiDE, quantile loss) on CPU and GPU, at 1 s and 10 s bins.

Run: ``.venv/bin/python -m benchmarks.forecasting.forecast_training_speed [--resolutions 1,10] [--devices cpu,cuda]
[--hours 18] [--epochs 2] [--batch-size 256] [--context-s 3600] [--horizon-s 600] [--seed 7]``

What is timed: :class:`~models.forecasting.darts_forecaster.DartsQuantileForecaster` fitted on one
twin ysb trace of ``--hours`` binned to each resolution, with a context of ``--context-s`` and an
output window of ``--horizon-s`` (so 3600 / 600 bins at 1 s, 360 / 60 at 10 s), for ``--epochs``
epochs; then single ``predict`` calls on the same device. Columns: ``windows`` (training windows
per epoch), ``fit_s`` (wall seconds for the whole fit, model construction included),
``s_per_epoch`` (``fit_s`` / epochs), ``predict_ms`` (median of 5 calls), ``speedup`` (CPU
``fit_s`` / this row's, for a GPU row at the same resolution). A device that is not there (no
CUDA) gets a row saying so instead of numbers, so the script runs anywhere and a GPU node fills
the rest. CPU fits use one torch thread (the package's policy for these small models; see
:mod:`models.torch_threads`).

Prints one JSON line per row as it goes, then a Markdown table.
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np

from flinktune.twin.workload import generate_trace
from models.forecasting.darts_forecaster import DartsQuantileForecaster

__all__ = ["COLUMNS", "main", "measure"]

COLUMNS = [
    "resolution_s",
    "device",
    "bins",
    "input_bins",
    "output_bins",
    "windows",
    "epochs",
    "batch_size",
    "fit_s",
    "s_per_epoch",
    "predict_ms",
    "speedup",
    "note",
]


def _cuda_available() -> bool:
    import torch

    return bool(torch.cuda.is_available())


def _csv(text: str, cast, name: str) -> list:
    try:
        out = [cast(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"--{name}: expected a comma-separated list, got {text!r}") from None
    if not out:
        raise argparse.ArgumentTypeError(f"--{name}: give at least one value")
    return out


def measure(
    resolution_s: int, device: str, *, hours: float, epochs: int, batch_size: int, context_s: int, horizon_s: int, seed: int
) -> dict:
    """One row of the table (see module doc); ``note`` says why a row has no numbers."""
    row: dict = {"resolution_s": resolution_s, "device": device, "epochs": epochs, "batch_size": batch_size}
    if context_s % resolution_s or horizon_s % resolution_s:
        raise ValueError(
            f"--context-s {context_s} and --horizon-s {horizon_s} must be multiples of the resolution {resolution_s} s"
        )
    if device == "cuda" and not _cuda_available():
        return row | {"note": "not measured: no CUDA device on this machine"}
    series = generate_trace("ysb", hours, seed)
    model = DartsQuantileForecaster(
        bin_s=resolution_s,
        input_bins=context_s // resolution_s,
        output_bins=horizon_s // resolution_s,
        n_epochs=epochs,
        batch_size=batch_size,
        device=device,
        seed=seed,
    )
    t0 = time.perf_counter()
    model.fit(series)
    fit_s = time.perf_counter() - t0
    bins = int(model.fit_info["train_bins"])
    history = series.iloc[-(context_s + resolution_s) :]
    model.predict(history, horizon_s)  # first call pays lazy set-up
    timings = []
    for _ in range(5):
        t0 = time.perf_counter()
        model.predict(history, horizon_s)
        timings.append(time.perf_counter() - t0)
    return row | {
        "bins": bins,
        "input_bins": model.input_bins,
        "output_bins": model.output_bins,
        "windows": bins - model.input_bins - model.output_bins + 1,
        "fit_s": round(fit_s, 2),
        "s_per_epoch": round(fit_s / epochs, 2),
        "predict_ms": round(float(np.median(timings)) * 1000, 1),
        "note": "",
    }


def _table(rows: list[dict]) -> str:
    lines = ["| " + " | ".join(COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
    for r in rows:
        lines.append("| " + " | ".join("" if r.get(c) is None else str(r.get(c)) for c in COLUMNS) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> list[dict]:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument(
        "--resolutions", type=lambda s: _csv(s, int, "resolutions"), default=[1, 10], help="bin widths in seconds (default 1,10)"
    )
    p.add_argument("--devices", type=lambda s: _csv(s, str, "devices"), default=["cpu", "cuda"])
    p.add_argument("--hours", type=float, default=18.0)
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--batch-size", type=int, default=256)
    p.add_argument("--context-s", type=int, default=3600, help="history the network reads (seconds)")
    p.add_argument("--horizon-s", type=int, default=600, help="output window (seconds)")
    p.add_argument("--seed", type=int, default=7)
    a = p.parse_args(argv)
    bad = [d for d in a.devices if d not in ("cpu", "cuda")]
    if bad:
        p.error(f"--devices: unknown device(s) {bad}; use cpu and/or cuda")
    if a.epochs < 1 or a.batch_size < 1 or a.hours <= 0:
        p.error(f"need --epochs >= 1, --batch-size >= 1 and --hours > 0, got {a.epochs}, {a.batch_size}, {a.hours}")
    rows = []
    for res in a.resolutions:
        cpu_fit = None
        for dev in a.devices:
            row = measure(
                res,
                dev,
                hours=a.hours,
                epochs=a.epochs,
                batch_size=a.batch_size,
                context_s=a.context_s,
                horizon_s=a.horizon_s,
                seed=a.seed,
            )
            if dev == "cpu":
                cpu_fit = row.get("fit_s")
            elif cpu_fit and row.get("fit_s"):
                row["speedup"] = round(cpu_fit / row["fit_s"], 2)
            rows.append(row)
            print(json.dumps(row), flush=True)
    print(_table(rows))
    return rows


if __name__ == "__main__":
    main()
