"""Collect a running job's metrics from Flink's REST API into the raw lake, live.

Flink's REST API has no history: it answers "now". Use :func:`collect_flink_rest` to poll a
:class:`~flinktune.localflink.metrics.RestMetricsSource` every ``interval_s`` until ``end_ms`` and
write each hour-aligned chunk as soon as the clock has passed it (memory holds the source's
buffer, trimmed to ``keep_s``). :func:`rest_source` builds the source for a job by name on a local
cluster's REST port.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from flinktune.clock import Clock
from flinktune.extract.sink import ExtractResult, RawSink, hour_chunks
from flinktune.extract.sources import copy_chunk
from flinktune.localflink.jobcontrol import JobControl, JobSpec
from flinktune.localflink.metrics import RestMetricsSource
from flinktune.localflink.rest import FlinkRest, RestError
from flinktune.metrics.schema import METRICS

__all__ = ["collect_flink_rest", "rest_source"]


def rest_source(
    port: int, job: str, *, host: str = "127.0.0.1", clock: Clock | None = None, timeout_s: float = 10.0
) -> RestMetricsSource:
    """A REST sampler of the job named ``job`` (its Flink job name) on ``host:port``; ``timeout_s``
    bounds every REST call (``Settings.timeouts.http_request_s``)."""
    control = JobControl(
        FlinkRest(port, host=host, timeout_s=timeout_s), JobSpec(jar=Path("-"), name=job)
    )  # the jar is never used to sample
    return RestMetricsSource(control, job=job, clock=clock, keep_s=7200.0)


def collect_flink_rest(
    source: RestMetricsSource,
    sink: RawSink,
    *,
    start_ms: int,
    end_ms: int,
    interval_s: float = 2.0,
    chunk_s: int = 300,
    clock: Clock | None = None,
    sleep: Callable[[float], None] = time.sleep,
) -> ExtractResult:
    """Sample from now until ``end_ms`` (clock time), writing chunks of ``[start_ms, end_ms)`` as they close.

    REST errors while sampling (a restarting JobManager) are kept in ``source.errors`` and show as
    missing samples; an error on every poll of a chunk leaves it empty and it is written as such.
    """
    clock = clock or source.clock
    job = source.job
    result = ExtractResult(job=job, source=f"flink-rest {source.rest.base}", start_ms=start_ms, end_ms=end_ms)
    seen: set[str] = set()
    for lo, hi in hour_chunks(start_ms, end_ms, chunk_s=chunk_s):
        while clock.now() * 1000 < hi:
            if clock.now() * 1000 >= lo:
                try:
                    source.sample()
                except RestError as exc:
                    source.errors.append(str(exc))
            sleep(interval_s)
        copy_chunk(source, sink, result, seen, lo, hi, where=f"Flink REST job {job!r} chunk [{lo}, {hi})")
    result.missing_metrics = sorted(set(METRICS) - seen)
    return result
