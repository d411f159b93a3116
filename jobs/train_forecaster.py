"""Train the input-rate forecasters of one job, backtest them, register the best, promote it if it wins.

``python -m jobs.train_forecaster --job demo`` runs :func:`flinktune.runs.forecaster_training.train_forecaster`
(select, register, promote) and prints a one-line JSON summary.
"""

from __future__ import annotations

import json

from flinktune.entry import OneLineParser, run_main
from flinktune.runs.forecaster_candidates import CANDIDATES
from flinktune.runs.forecaster_training import train_forecaster as run

__all__ = ["main", "run"]


def main(argv: list[str] | None = None) -> int:
    """``python -m jobs.train_forecaster``: one line and exit code 2 on a known error (see :mod:`flinktune.entry`)."""
    return run_main("python -m jobs.train_forecaster", _main, argv)


def _main(argv: list[str]) -> None:
    parser = OneLineParser(prog="python -m jobs.train_forecaster", description=__doc__.splitlines()[0])
    parser.add_argument("--job", required=True, help="job name (curated features_1m partition job=<job>)")
    parser.add_argument("--epochs", type=int, default=20, help="training epochs (default 20)")
    parser.add_argument("--holdout-frac", type=float, default=0.25, help="share of history held out for the backtest")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--candidates", default=",".join(CANDIDATES), help="comma-separated forecasters to compare")
    parser.add_argument("--margin", type=float, default=0.05, help="relative peak-MAE gain needed to replace the champion")
    parser.add_argument("--max-under-rate", type=float, default=0.05, help="highest acceptable under-forecast rate")
    parser.add_argument(
        "--select-refits",
        type=int,
        default=1,
        help="refits over the selection span (forward chaining; default 1 = one fit before it)",
    )
    args = parser.parse_args(argv)
    summary = run(
        job=args.job,
        n_epochs=args.epochs,
        holdout_frac=args.holdout_frac,
        seed=args.seed,
        candidates=tuple(c for c in args.candidates.split(",") if c),
        margin=args.margin,
        max_under_rate=args.max_under_rate,
        select_refits=args.select_refits,
    )
    print(json.dumps(summary, sort_keys=True, default=float))


if __name__ == "__main__":
    raise SystemExit(main())
