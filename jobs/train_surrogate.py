"""Train the configuration surrogate of one job on its profiling observations; register and promote it.

``python -m jobs.train_surrogate --job demo`` runs :func:`flinktune.runs.surrogate_training.train_surrogate`
(a version that predicts the newest observations better replaces the champion) and prints a one-line JSON summary.
"""

from __future__ import annotations

import json

from flinktune.entry import OneLineParser, run_main
from flinktune.runs.surrogate_training import KINDS
from flinktune.runs.surrogate_training import train_surrogate as run

__all__ = ["main", "run"]


def main(argv: list[str] | None = None) -> int:
    """``python -m jobs.train_surrogate``: one line and exit code 2 on a known error (see :mod:`flinktune.entry`)."""
    return run_main("python -m jobs.train_surrogate", _main, argv)


def _main(argv: list[str]) -> None:
    parser = OneLineParser(prog="python -m jobs.train_surrogate", description=__doc__.splitlines()[0])
    parser.add_argument("--job", required=True, help="job name (curated profiling_observations partition job=<job>)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--kind", choices=KINDS, default="gp", help="gp: pooled GPs; rgpe: rank-weighted bucket GPs")
    args = parser.parse_args(argv)
    print(json.dumps(run(job=args.job, seed=args.seed, kind=args.kind), sort_keys=True, default=float))


if __name__ == "__main__":
    raise SystemExit(main())
