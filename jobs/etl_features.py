"""Spark ETL: one job's raw metric samples -> validated curated ``features_10s`` and ``features_1m``.

``python -m jobs.etl_features --job demo [--start-ms N] [--end-ms N]`` runs
:func:`flinktune.runs.feature_etl.etl_features` and prints its one-line JSON summary.
"""

from __future__ import annotations

import json
import logging
import sys

from flinktune.entry import OneLineParser, run_main
from flinktune.runs.feature_etl import etl_features as run

__all__ = ["main", "run"]


def main(argv: list[str] | None = None) -> int:
    """``python -m jobs.etl_features``: one line and exit code 2 on a known error (see :mod:`flinktune.entry`)."""
    return run_main("python -m jobs.etl_features", _main, argv)


def _main(argv: list[str]) -> None:
    parser = OneLineParser(prog="python -m jobs.etl_features", description=__doc__.splitlines()[0])
    parser.add_argument("--job", required=True, help="Flink job name (raw partition job=<job>)")
    parser.add_argument("--start-ms", type=int, default=None, help="range start, epoch ms UTC (default: first sample)")
    parser.add_argument(
        "--end-ms", type=int, default=None, help="range end (exclusive), epoch ms UTC (default: after last sample)"
    )
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    summary = run(job=args.job, start_ms=args.start_ms, end_ms=args.end_ms)
    print(json.dumps(summary, sort_keys=True))


if __name__ == "__main__":
    raise SystemExit(main())
