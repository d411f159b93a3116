"""The last minutes of a job's metrics straight from Prometheus, for a decision the lake lags behind.

Use :func:`fresh_metrics_source` where a decide run on a real cluster builds its metrics source:
with a Prometheus configured (``FLINKTUNE_PROMETHEUS_CONN_ID``, or ``FLINKTUNE_PROMETHEUS_URL``
and its credentials: the ingest's own settings) it is a
:class:`~flinktune.decision.fresh.FreshMetricsSource` over the raw lake and a
:class:`PrometheusRecent`; without one, the raw lake alone. :class:`PrometheusRecent` asks with
the ingest's own code (:func:`flinktune.extract.prometheus.query_samples` over the same queries and
``FLINKTUNE_PROMETHEUS_NAMES`` preset, the same step, timeouts and retries), so its rows are the
ones the next ingest run writes to the lake for those seconds.
"""

from __future__ import annotations

import pandas as pd
import requests

from flinktune.clock import Clock, SystemClock
from flinktune.decision.fresh import FreshMetricsSource, RecentMetricsUnavailable
from flinktune.decision.stages import MetricsSource
from flinktune.extract.endpoint import EndpointError, PrometheusEndpoint, resolve_endpoint
from flinktune.extract.prometheus import MAX_POINTS, QUERY_PRESETS, PrometheusClient, job_queries, query_samples
from flinktune.extract.sink import ExtractError
from flinktune.lake import Lake, LakeMetricsSource
from flinktune.settings import PrometheusSettings, Settings, read_group

__all__ = ["PrometheusRecent", "fresh_metrics_source", "prometheus_configured"]


class PrometheusRecent:
    """:class:`~flinktune.decision.fresh.RecentMetrics` over Prometheus' ``query_range`` (module docstring).

    ``endpoint`` is resolved on the first call (an Airflow connection that cannot be read is then a
    reason on the decision, not a crash of the run); ``names`` is the query preset
    (``FLINKTUNE_PROMETHEUS_NAMES``)."""

    def __init__(
        self,
        endpoint: PrometheusEndpoint | None = None,
        *,
        names: str = "default",
        timeout_s: float = 10.0,
        retries: int = 2,
        step_s: int = 1,
    ) -> None:
        if names not in QUERY_PRESETS:
            raise ValueError(f"unknown Prometheus query preset {names!r}; known: {', '.join(QUERY_PRESETS)}")
        self.endpoint, self.names, self.timeout_s, self.retries, self.step_s = endpoint, names, timeout_s, retries, step_s
        self._client: PrometheusClient | None = None

    @property
    def name(self) -> str:
        return f"Prometheus {self.endpoint.display_url()}" if self.endpoint is not None else "Prometheus"

    def _connect(self) -> PrometheusClient:
        if self._client is None:
            try:
                self.endpoint = self.endpoint or resolve_endpoint()
            except EndpointError as exc:
                raise RecentMetricsUnavailable(str(exc)) from None
            self._client = PrometheusClient(self.endpoint, timeout_s=self.timeout_s, retries=self.retries)
        return self._client

    def recent(self, job: str, start_ms: int, end_ms: int) -> pd.DataFrame:
        """``job``'s samples in ``[start_ms, end_ms)``; at most :data:`~flinktune.extract.prometheus.MAX_POINTS` steps
        (the newest part of a longer range: a decision needs the minutes nearest to now)."""
        client = self._connect()
        start_ms = max(start_ms, end_ms - (MAX_POINTS - 1) * self.step_s * 1000)
        preset = QUERY_PRESETS[self.names]
        exprs = job_queries(job, queries=preset(job) if preset is not None else None)
        try:
            return query_samples(client, exprs, job=job, start_ms=start_ms, end_ms=end_ms, step_s=self.step_s)
        except (ExtractError, requests.RequestException) as exc:
            raise RecentMetricsUnavailable(" ".join(str(exc).split())[:300]) from None


def prometheus_configured() -> bool:
    """Whether the ingest's Prometheus settings name an endpoint (a connection id or a URL)."""
    s = read_group(PrometheusSettings)
    return bool(s.conn_id or s.url)


def fresh_metrics_source(settings: Settings, lake: Lake, *, clock: Clock | None = None) -> MetricsSource:
    """A decide run's metrics source on a real cluster (module docstring); ``clock`` the run's (default: the system's)."""
    history = LakeMetricsSource(lake)
    if not prometheus_configured():
        return history
    recent = PrometheusRecent(
        names=read_group(PrometheusSettings).names,
        timeout_s=settings.timeouts.http_request_s,
        retries=settings.timeouts.http_retries,
    )
    return FreshMetricsSource(history, recent, clock or SystemClock())
