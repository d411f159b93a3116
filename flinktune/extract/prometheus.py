"""Extract raw metrics from Prometheus' HTTP API (``/api/v1/query_range``) into the lake.

Use :func:`extract_prometheus` with a :class:`PrometheusClient`::

    client = PrometheusClient(resolve_endpoint(conn_id))
    result = extract_prometheus(client, RawSink(lake), job="demo", start_ms=a, end_ms=b)

Work is cut by job (one per call) and by time (:func:`~flinktune.extract.sink.hour_chunks`,
``chunk_s`` at most); each chunk is queried metric by metric and written before the next is asked
for, so memory holds one chunk of one job. Queries come from :data:`METRICS`' Prometheus names and
Flink's reporter labels (:class:`LabelMap`): subtask metrics ``sum by (<vertex>, <subtask>)``,
job metrics aggregated over their series (sum of rates, sizes and resources; max of latencies,
levels and counters; ``jobRunning`` = uptime > 0). A subtask series lacking the vertex or subtask
label is an :class:`ExtractError` naming metric, label and the labels present; a metric with no
series at all is listed in ``missing_metrics`` (the raw contract decides what that means).

Transient failures (HTTP 5xx, 429, timeouts, refused connections) are retried by urllib3's own
``Retry`` on a ``requests`` session (exponential backoff, ``Retry-After`` honoured), every request
bounded by a connect and read timeout (``FLINKTUNE_TIMEOUT_HTTP_REQUEST_S``, retries
``FLINKTUNE_TIMEOUT_HTTP_RETRIES``); 4xx answers (a bad query) fail at once with Prometheus' own
error text. A call therefore ends within about ``(retries + 1) * timeout`` plus the backoffs.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import pandas as pd
import requests
from requests.adapters import HTTPAdapter

from flinktune.extract.endpoint import PrometheusEndpoint
from flinktune.extract.sink import ExtractError, ExtractResult, RawSink, hour_chunks
from flinktune.http_retry import retry_policy
from flinktune.metrics.schema import METRICS, RAW_DTYPES

__all__ = [
    "MAX_POINTS",
    "QUERY_PRESETS",
    "LabelMap",
    "PrometheusClient",
    "extract_prometheus",
    "job_queries",
    "metric_queries",
    "operator_gauge_queries",
    "query_samples",
]

log = logging.getLogger(__name__)

#: Prometheus refuses range queries of more than 11,000 points per series.
MAX_POINTS = 11_000
_JOB_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,252}$")
#: Job-level metrics whose series combine by max (levels, quantiles, counters); the rest sum.
_MAX_METRICS = {
    "latencyP50Ms",
    "latencyP95Ms",
    "latencyP99Ms",
    "lastCheckpointDurationMs",
    "lastCheckpointSizeBytes",
    "numRestarts",
    "taskManagers",
    "taskSlotsTotal",
    "configParallelism",
    "configTaskSlots",
    "configCpu",
    "configMemoryMb",
    "configCheckpointIntervalS",
}


@dataclass(frozen=True)
class LabelMap:
    """Label names carrying the job, vertex and subtask (Flink's Prometheus reporter by default)."""

    job: str = "job_name"
    vertex: str = "task_name"
    subtask: str = "subtask_index"


def _job_selector(job: str, labels: LabelMap) -> str:
    """The label matcher of ``job``. Flink's Prometheus reporter writes label values with every
    character outside ``[a-zA-Z0-9:_]`` replaced by ``_`` (job ``bench-small`` is labelled
    ``bench_small``), other exporters write the name as it is: the matcher takes both spellings."""
    if not _JOB_NAME.match(job):
        raise ExtractError(f"job name {job!r} is not a valid deployment name (it is put in a PromQL selector)")
    pattern = "".join("[._]" if c == "." else "[-_]" if c == "-" else c for c in job)
    return f'{labels.job}=~"{pattern}"'


def metric_queries(job: str, labels: LabelMap = LabelMap()) -> dict[str, str]:
    """PromQL per raw metric for ``job`` (see the module docstring for the aggregation)."""
    job_sel = _job_selector(job, labels)
    out: dict[str, str] = {}
    for metric, info in METRICS.items():
        sel = f"{info.prometheus}{{{job_sel}}}"
        if info.level == "subtask":
            out[metric] = f"sum by ({labels.vertex}, {labels.subtask}) ({sel})"
        elif metric == "jobRunning":
            out[metric] = f"max by ({labels.job}) ({sel}) > bool 0"
        else:
            out[metric] = f"{'max' if metric in _MAX_METRICS else 'sum'} by ({labels.job}) ({sel})"
    return out


def operator_gauge_queries(job: str, labels: LabelMap = LabelMap()) -> dict[str, str]:
    """Overrides of :func:`metric_queries` for a job that reports its own offered rate, backlog and
    latency as operator gauges (flinktune's benchmark job, ``flinkjob/``) through Flink's own
    Prometheus reporter, with no Kafka exporter next to it. Use it as ``queries=`` of
    :func:`extract_prometheus` (``FLINKTUNE_PROMETHEUS_NAMES=flink-operator-gauges``).

    The reporter exports the parallelism only as the number of subtask series, which is what
    ``configParallelism`` counts here (the widest vertex). TaskManager metrics carry no job label,
    so with several jobs on one Prometheus ``cpuLoad`` and ``heapUsedMb`` stay missing.
    """
    sel = f"{{{_job_selector(job, labels)}}}"
    op = "flink_taskmanager_job_task_operator_"
    return {
        "workloadRate": f"sum by ({labels.job}) ({op}offeredRate{sel})",
        "pendingRecords": f"sum by ({labels.job}) ({op}pendingRecords{sel})",
        "latencyP50Ms": f"max by ({labels.job}) ({op}latencyP50Ms{sel})",
        "latencyP95Ms": f"max by ({labels.job}) ({op}latencyP95Ms{sel})",
        "latencyP99Ms": f"max by ({labels.job}) ({op}latencyP99Ms{sel})",
        "configParallelism": f"max by ({labels.job}) (count by ({labels.job}, {labels.vertex}) "
        f"(flink_taskmanager_job_task_busyTimeMsPerSecond{sel}))",
    }


#: Named sets of query overrides (``FLINKTUNE_PROMETHEUS_NAMES``): where the job-level metrics come from.
QUERY_PRESETS = {"default": None, "flink-operator-gauges": operator_gauge_queries}


#: Answers worth asking again: Prometheus (or a proxy in front of it) overloaded or restarting.
_RETRY_STATUS = (429, 500, 502, 503, 504)


class PrometheusClient:
    """``query_range`` over HTTP: a ``requests`` session whose adapter carries :func:`flinktune.http_retry.retry_policy`,
    each request bounded by ``timeout_s`` (connect and read). ``attempts`` counts HTTP calls made,
    retries included (from urllib3's retry history)."""

    def __init__(
        self,
        endpoint: PrometheusEndpoint,
        *,
        timeout_s: float = 10.0,
        retries: int = 2,
        backoff_s: float = 0.5,
        max_backoff_s: float = 8.0,
    ) -> None:
        if not timeout_s > 0:
            raise ValueError(f"Prometheus request timeout must be > 0 s, got {timeout_s}")
        self.endpoint = endpoint
        self.timeout_s = timeout_s
        self.retries = retries
        self.session = requests.Session()
        policy = retry_policy(
            retries,
            service="Prometheus",
            statuses=_RETRY_STATUS,
            backoff_s=backoff_s,
            max_backoff_s=max_backoff_s,
            jitter_s=backoff_s / 2,  # many extractors must not retry in step against a struggling server
            retry_after=True,
        )
        adapter = HTTPAdapter(max_retries=policy)
        self.session.mount("http://", adapter)
        self.session.mount("https://", adapter)
        self.attempts = 0

    def _get(self, path: str, params: Mapping[str, str]) -> dict:
        shown = f"GET {self.endpoint.display_url().rstrip('/')}{path}"
        where = f"{shown} query={params.get('query')!r}"
        try:
            resp = self.session.get(
                self.endpoint.api(path),
                params=dict(params),
                headers={"Accept": "application/json", **self.endpoint.headers()},
                timeout=(self.timeout_s, self.timeout_s),
            )
        except requests.RequestException as exc:
            # Retries are spent (or the error is not retryable); the cause's class names what failed.
            self.attempts += self.retries + 1
            cause = getattr(exc.args[0], "reason", None) if exc.args else None
            raise ExtractError(
                f"{where}: gave up after {self.retries + 1} attempts; last: {type(cause or exc).__name__}"
            ) from None
        history = getattr(getattr(resp.raw, "retries", None), "history", ()) or ()
        self.attempts += 1 + len(history)
        for earlier in history:
            log.warning("%s: %s, retried", shown, f"HTTP {earlier.status}" if earlier.status else earlier.error)
        if resp.status_code >= 400:
            text = _error_text(resp.content)
            if resp.status_code in _RETRY_STATUS:
                raise ExtractError(f"{where}: gave up after {1 + len(history)} attempts; last: HTTP {resp.status_code}: {text}")
            raise ExtractError(f"{where}: HTTP {resp.status_code}: {text}")
        try:
            doc = resp.json()
        except ValueError:
            raise ExtractError(f"{shown}: answer is not JSON: {resp.content[:200]!r}") from None
        if doc.get("status") != "success":
            raise ExtractError(f"{where}: {doc.get('errorType')}: {doc.get('error')}")
        for w in doc.get("warnings") or []:
            log.warning("%s: Prometheus warns: %s", shown, w)
        return doc["data"]

    def query_range(self, query: str, start_ms: int, end_ms: int, step_s: float) -> list[dict]:
        """Series of a range query evaluated at ``start_ms, start_ms + step, ... <= end_ms`` (inclusive)."""
        points = (end_ms - start_ms) / 1000 / step_s + 1
        if points > MAX_POINTS:
            raise ExtractError(
                f"range query of {points:.0f} points per series exceeds Prometheus' {MAX_POINTS}; use smaller chunks"
            )
        data = self._get(
            "/api/v1/query_range",
            {"query": query, "start": f"{start_ms / 1000:.3f}", "end": f"{end_ms / 1000:.3f}", "step": f"{step_s:g}"},
        )
        if data.get("resultType") != "matrix":
            raise ExtractError(f"query {query!r}: expected a matrix, got {data.get('resultType')!r}")
        return data["result"]


def _error_text(body: bytes) -> str:
    try:
        doc = json.loads(body)
        return f"{doc.get('errorType')}: {doc.get('error')}"
    except ValueError:
        return body[:300].decode("utf-8", "replace")


def _series_rows(metric: str, series: list[dict], labels: LabelMap, where: str) -> list[pd.DataFrame]:
    """Raw-schema frames (without job) of one metric's series."""
    per_subtask = METRICS[metric].level == "subtask"
    out = []
    for s in series:
        lab = s.get("metric", {})
        vertex, subtask = "", -1
        if per_subtask:
            for need in (labels.vertex, labels.subtask):
                if need not in lab:
                    raise ExtractError(
                        f"{where}: a series of {metric} ({METRICS[metric].prometheus}) lacks label {need!r}; labels present: {sorted(lab)}"
                    )
            vertex = lab[labels.vertex]
            try:
                subtask = int(lab[labels.subtask])
            except ValueError:
                raise ExtractError(f"{where}: {metric} has {labels.subtask}={lab[labels.subtask]!r}, not an integer") from None
        values = s.get("values") or []
        if not values:
            continue
        ts = np.array([round(float(t) * 1000) for t, _ in values], dtype=np.int64)
        val = np.array([float(v) for _, v in values], dtype=np.float64)  # "NaN", "+Inf" parse; the contract judges
        out.append(pd.DataFrame({"metric": metric, "vertex": vertex, "subtask": subtask, "ts_ms": ts, "value": val}))
    return out


def job_queries(job: str, labels: LabelMap = LabelMap(), queries: Mapping[str, str] | None = None) -> dict[str, str]:
    """PromQL per raw metric for ``job``: :func:`metric_queries` with ``queries`` (a preset's overrides) over it."""
    return {**metric_queries(job, labels), **(queries or {})}


def query_samples(
    client: PrometheusClient,
    exprs: Mapping[str, str],
    *,
    job: str,
    start_ms: int,
    end_ms: int,
    step_s: int = 1,
    labels: LabelMap = LabelMap(),
    where: str = "",
) -> pd.DataFrame:
    """``job``'s samples in ``[start_ms, end_ms)`` (raw schema, every step-aligned instant), one range query per
    metric of ``exprs``: what the ingest writes to the lake for that range, and what a decision reads of the
    minutes the lake does not hold yet (:mod:`flinktune.extract.recent`). ``end_ms - start_ms`` is at most
    :data:`MAX_POINTS` steps."""
    step_ms = step_s * 1000
    first = -(-start_ms // step_ms) * step_ms
    where = where or f"Prometheus job {job!r} range [{start_ms}, {end_ms})"
    frames: list[pd.DataFrame] = []
    if first < end_ms:
        for metric, expr in exprs.items():
            frames += _series_rows(metric, client.query_range(expr, first, end_ms - 1, step_s), labels, where)
    df = (
        pd.concat(frames, ignore_index=True)
        if frames
        else pd.DataFrame({c: [] for c in ("metric", "vertex", "subtask", "ts_ms", "value")})
    )
    df.insert(0, "job", job)
    return df.astype(RAW_DTYPES)


def extract_prometheus(
    client: PrometheusClient,
    sink: RawSink,
    *,
    job: str,
    start_ms: int,
    end_ms: int,
    step_s: int = 1,
    chunk_s: int = 900,
    labels: LabelMap = LabelMap(),
    queries: Mapping[str, str] | None = None,
) -> ExtractResult:
    """Extract ``job``'s samples in ``[start_ms, end_ms)`` at ``step_s`` into the lake, chunk by chunk.

    ``queries`` overrides :func:`metric_queries` per metric (e.g. a workload rate from another
    exporter). ``start_ms`` is floored to the step so reruns evaluate at the same instants.
    """
    if chunk_s / step_s + 1 > MAX_POINTS:
        raise ExtractError(f"chunk_s={chunk_s} at step_s={step_s} exceeds Prometheus' {MAX_POINTS} points per series")
    step_ms = step_s * 1000
    start_ms = (start_ms // step_ms) * step_ms
    exprs = job_queries(job, labels, queries)
    result = ExtractResult(job=job, source=f"prometheus {client.endpoint.display_url()}", start_ms=start_ms, end_ms=end_ms)
    seen: set[str] = set()
    for lo, hi in hour_chunks(start_ms, end_ms, chunk_s=chunk_s):
        where = f"Prometheus job {job!r} chunk [{lo}, {hi})"
        df = query_samples(client, exprs, job=job, start_ms=lo, end_ms=hi, step_s=step_s, labels=labels, where=where)
        seen.update(df["metric"].unique().tolist())
        written = sink.write(job, df, lo, hi, where=where)
        result.chunks += 1
        result.rows += len(df)
        if written is not None:
            result.files.append(str(written))
    result.missing_metrics = sorted(set(exprs) - seen)
    if result.missing_metrics:
        log.warning("Prometheus job %r: no series for %s in [%d, %d)", job, result.missing_metrics, start_ms, end_ms)
    return result
