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

from flinktune.clock import Clock, SystemClock
from flinktune.entry import OneLineParser, run_main
from flinktune.extract.sink import RawSink
from flinktune.job_name import job_name
from flinktune.lake import Lake
from flinktune.settings import Settings, load_settings

__all__ = ["SOURCES", "main", "run"]

SOURCES = ("prometheus", "flink-rest", "twin")


def run(
    *,
    job: str,
    source: str = "prometheus",
    start_ms: int,
    end_ms: int,
    settings: Settings | None = None,
    conn_id: str | None = None,
    step_s: int = 1,
    chunk_s: int = 900,
    flink_port: int = 8081,
    interval_s: float = 2.0,
    clock: Clock | None = None,
) -> dict:
    """Extract ``job`` in ``[start_ms, end_ms)`` from ``source``; returns the JSON summary."""
    job = job_name(job)  # before it reaches any path, model name or API call
    settings = settings or load_settings()
    if source not in SOURCES:
        raise ValueError(f"unknown source {source!r}; known: {list(SOURCES)}")
    if end_ms <= start_ms:
        raise ValueError(f"end_ms {end_ms} must be after start_ms {start_ms}")
    if not step_s > 0:
        raise ValueError(f"step_s (--step-s) must be > 0 seconds, got {step_s!r}")
    if not interval_s > 0:
        raise ValueError(f"interval_s must be > 0 seconds, got {interval_s!r}")
    sink = RawSink(Lake(settings.lake_dir))  # type: ignore[arg-type]
    if source == "prometheus":
        from flinktune.extract.endpoint import resolve_endpoint
        from flinktune.extract.prometheus import PrometheusClient, extract_prometheus

        client = PrometheusClient(
            resolve_endpoint(conn_id), timeout_s=settings.timeouts.http_request_s, retries=settings.timeouts.http_retries
        )
        from flinktune.extract.prometheus import QUERY_PRESETS
        from flinktune.settings import PrometheusSettings, read_group

        preset = QUERY_PRESETS[read_group(PrometheusSettings).names]  # FLINKTUNE_PROMETHEUS_NAMES
        result = extract_prometheus(
            client,
            sink,
            job=job,
            start_ms=start_ms,
            end_ms=end_ms,
            step_s=step_s,
            chunk_s=chunk_s,
            queries=preset(job) if preset is not None else None,
        )
    elif source == "flink-rest":
        from flinktune.localflink.rest_extract import collect_flink_rest, rest_source

        clock = clock or SystemClock()
        if start_ms < clock.now() * 1000 - interval_s * 1000:
            raise ValueError(f"flink-rest has no history: start_ms {start_ms} is in the past (now {int(clock.now() * 1000)})")
        rest = rest_source(flink_port, job, clock=clock, timeout_s=settings.timeouts.http_request_s)
        result = collect_flink_rest(
            rest, sink, start_ms=start_ms, end_ms=end_ms, interval_s=interval_s, chunk_s=min(chunk_s, 300), clock=clock
        )
    else:
        raise ValueError("source 'twin' writes raw metrics itself: run jobs.simulate (or jobs.decide) for the twin")
    return result.to_dict()


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
