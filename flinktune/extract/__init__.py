"""Extractors: metrics sources -> raw parquet in the lake (``raw/metrics/job=/date=/hour=``).

- :mod:`flinktune.extract.prometheus`: Prometheus ``query_range``, chunked, retried, streamed.
- live polling of Flink's REST API lives with the Flink REST client: :mod:`flinktune.localflink.rest_extract`
  (this package never imports a cluster's client).
- :mod:`flinktune.extract.sources`: any ``MetricsSource`` (the twin, a REST buffer).
- :mod:`flinktune.extract.sink`: hour-aligned chunks and the idempotent raw writer they share.
- :mod:`flinktune.extract.endpoint`: Prometheus URL and credentials (environment or Airflow).

``jobs.extract_metrics`` is the entry point. Import submodules directly (nothing heavy at load).
"""

__all__: list[str] = []
