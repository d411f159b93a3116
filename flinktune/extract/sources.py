"""Extract from any :class:`~flinktune.decision.stages.MetricsSource` (the twin, a buffered Flink REST poller).

Use :func:`extract_from_source` when the source already answers ``fetch(job, start_ms, end_ms)``
with raw-schema rows: it walks the range in hour-aligned chunks and writes each through the
:class:`~flinktune.extract.sink.RawSink`, so re-extracting a range replaces its files.
"""

from __future__ import annotations

from flinktune.decision.stages import MetricsSource
from flinktune.extract.sink import ExtractResult, RawSink, hour_chunks
from flinktune.metrics.schema import METRICS

__all__ = ["copy_chunk", "extract_from_source"]


def extract_from_source(
    source: MetricsSource, sink: RawSink, *, job: str, start_ms: int, end_ms: int, chunk_s: int = 900, name: str = "source"
) -> ExtractResult:
    """Copy ``job``'s samples in ``[start_ms, end_ms)`` from ``source`` to the lake, chunk by chunk."""
    result = ExtractResult(job=job, source=name, start_ms=start_ms, end_ms=end_ms)
    seen: set[str] = set()
    for lo, hi in hour_chunks(start_ms, end_ms, chunk_s=chunk_s):
        copy_chunk(source, sink, result, seen, lo, hi, where=f"{name} job {job!r} chunk [{lo}, {hi})")
    result.missing_metrics = sorted(set(METRICS) - seen)
    return result


def copy_chunk(
    source: MetricsSource, sink: RawSink, result: ExtractResult, seen: set[str], lo: int, hi: int, *, where: str
) -> None:
    """Fetch ``[lo, hi)`` of ``result.job`` from ``source``, write it through ``sink``, count it in ``result``."""
    df = source.fetch(result.job, lo, hi)
    seen.update(df["metric"].dropna().unique().tolist())
    written = sink.write(result.job, df, lo, hi, where=where)
    result.chunks += 1
    result.rows += len(df)
    if written is not None:
        result.files.append(str(written))
