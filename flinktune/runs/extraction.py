"""Extract one job's metrics over a time range from a source into the raw lake (``raw/metrics/job=/date=/hour=``).

Use :func:`extract_range` from an entry point or a DAG task: it checks the range, picks the source
(``prometheus``: ``query_range`` chunk by chunk, with the configured query names; ``flink-rest``: a
live poll of a running job, which keeps no history; ``twin``: an error, as the twin writes raw
samples itself) and returns the one-line JSON summary. Re-extracting a range replaces its files
(:mod:`flinktune.extract.sink`).
"""

from __future__ import annotations

from flinktune.clock import Clock, SystemClock
from flinktune.extract.sink import RawSink
from flinktune.job_name import job_name
from flinktune.lake import Lake
from flinktune.settings import Settings, load_settings

__all__ = ["SOURCES", "extract_range"]

SOURCES = ("prometheus", "flink-rest", "twin")


def extract_range(
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
        from flinktune.extract.prometheus import QUERY_PRESETS, PrometheusClient, extract_prometheus
        from flinktune.settings import PrometheusSettings, read_group

        client = PrometheusClient(
            resolve_endpoint(conn_id), timeout_s=settings.timeouts.http_request_s, retries=settings.timeouts.http_retries
        )
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
