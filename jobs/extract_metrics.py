"""Extract one job's metrics from a source into the raw lake (``raw/metrics/job=/date=/hour=``).

``python -m jobs.extract_metrics --job demo --source prometheus --start-ms A --end-ms B`` prints a
one-line JSON summary ``{job, source, start_ms, end_ms, rows, chunks, files, missing_metrics}``.

Sources:

- ``prometheus``: ``query_range`` chunk by chunk (URL and credentials from ``conn_id``, an Airflow
  connection, or ``FLINKTUNE_PROMETHEUS_URL`` / ``_TOKEN`` / ``_USER`` / ``_PASSWORD``).
- ``flink-rest``: polls a running job on Flink's REST port (``flink_port``) live until ``end_ms``;
  Flink keeps no history, so ``start_ms`` must not be in the past.
- ``twin``: the twin writes raw samples itself (``jobs.simulate``); asking for it here is an error
  that says so.

Re-extracting a range replaces its files (see :mod:`flinktune.extract.sink`).
"""

from __future__ import annotations

import json
import logging
import sys

from flinktune.entry import OneLineParser, run_main
from flinktune.runs.extraction import SOURCES, extract_range

__all__ = ["SOURCES", "main", "run"]

#: The extraction itself (:func:`flinktune.runs.extraction.extract_range`); this module parses and prints.
run = extract_range


def main(argv: list[str] | None = None) -> int:
    """``python -m jobs.extract_metrics``: one line and exit code 2 on a known error (see :mod:`flinktune.entry`)."""
    return run_main("python -m jobs.extract_metrics", _main, argv)


def _main(argv: list[str]) -> None:
    p = OneLineParser(prog="python -m jobs.extract_metrics", description=__doc__.splitlines()[0])
    p.add_argument("--job", required=True, help="Flink job (deployment) name")
    p.add_argument("--source", default="prometheus", choices=SOURCES)
    p.add_argument("--start-ms", type=int, required=True, help="range start, epoch ms UTC")
    p.add_argument("--end-ms", type=int, required=True, help="range end (exclusive), epoch ms UTC")
    p.add_argument("--conn-id", default=None, help="Airflow connection of Prometheus (default: FLINKTUNE_PROMETHEUS_* env)")
    p.add_argument("--step-s", type=int, default=1)
    p.add_argument("--chunk-s", type=int, default=900)
    p.add_argument("--flink-port", type=int, default=8081)
    a = p.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    summary = run(
        job=a.job,
        source=a.source,
        start_ms=a.start_ms,
        end_ms=a.end_ms,
        conn_id=a.conn_id,
        step_s=a.step_s,
        chunk_s=a.chunk_s,
        flink_port=a.flink_port,
    )
    print(json.dumps(summary, sort_keys=True))


if __name__ == "__main__":
    raise SystemExit(main())
