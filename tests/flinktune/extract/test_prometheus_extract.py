"""extract_prometheus against a scripted Prometheus HTTP API on 127.0.0.1: chunking, retries by
urllib3's Retry (a stand-in that fails then succeeds, one that hangs: bounded by the timeout), bad
queries, missing labels, idempotent re-extraction, and secrets kept out of messages."""

from __future__ import annotations

import json
import socket
import threading
import time
import urllib.parse
from http.server import ThreadingHTTPServer

import pytest
from json_http import JsonHandler

import jobs.extract_metrics as job_extract
from flinktune.extract.endpoint import EndpointError, PrometheusEndpoint, endpoint_from_env, resolve_endpoint
from flinktune.extract.prometheus import PrometheusClient, extract_prometheus
from flinktune.extract.sink import ExtractError, RawSink
from flinktune.lake import Lake
from flinktune.metrics.schema import METRICS

START = 1_714_521_600_000  # 2024-05-01T00:00Z
BY_PROM = {info.prometheus: m for m, info in METRICS.items()}


class FakePrometheus:
    """Answers query_range from a formula; ``fail_next`` scripts HTTP errors; records requests."""

    def __init__(self, *, drop_label: str | None = None) -> None:
        self.fail_next: list[int] = []
        self.requests: list[dict] = []
        self.headers: list[str | None] = []
        self.drop_label = drop_label
        outer = self

        class Handler(JsonHandler):
            def do_GET(self):
                q = dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(self.path).query))
                outer.requests.append(q)
                outer.headers.append(self.headers.get("Authorization"))
                if outer.fail_next:
                    code = outer.fail_next.pop(0)
                    body = {
                        "status": "error",
                        "errorType": "bad_data" if code == 400 else "internal",
                        "error": f"scripted {code}",
                    }
                    return self._send(code, body)
                self._send(200, {"status": "success", "data": {"resultType": "matrix", "result": outer.series(q)}})

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_port}"

    @staticmethod
    def value(metric: str, t_s: float, subtask: int) -> float:
        return float(len(metric) * 10 + subtask + (t_s % 100))

    def series(self, q: dict) -> list[dict]:
        name = next(p for p in BY_PROM if p + "{" in q["query"])
        metric = BY_PROM[name]
        if metric == "heapUsedMb":
            return []  # a metric this Prometheus does not have
        start, end, step = float(q["start"]), float(q["end"]), float(q["step"])
        times = [start + i * step for i in range(int((end - start) / step) + 1)]
        labels = (
            [{"task_name": "map", "subtask_index": str(i)} for i in range(2)]
            if METRICS[metric].level == "subtask"
            else [{"job_name": "demo"}]
        )
        out = []
        for i, lab in enumerate(labels):
            lab = {k: v for k, v in lab.items() if k != self.drop_label}
            out.append({"metric": lab, "values": [[t, repr(self.value(metric, t, i))] for t in times]})
        return out

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def prom():
    p = FakePrometheus()
    yield p
    p.close()


def client_for(url: str, **kw) -> PrometheusClient:
    kw.setdefault("backoff_s", 0.01)  # urllib3's backoff, kept short in tests
    return PrometheusClient(PrometheusEndpoint(url, token="s3cret-token"), **kw)


def test_extracts_chunks_by_hour_with_labels_mapped_and_values_exact(prom, tmp_path):
    lake = Lake(tmp_path)
    res = extract_prometheus(
        client_for(prom.url), RawSink(lake), job="demo", start_ms=START + 3_540_000, end_ms=START + 3_660_000, chunk_s=60
    )
    assert res.chunks == 2 and res.missing_metrics == ["heapUsedMb"]
    assert [p.split("/")[-2] for p in res.files] == ["hour=00", "hour=01"]  # never across an hour
    got = lake.read_raw("demo")
    assert len(got) == res.rows == 120 * (len(METRICS) - 1 + 5)  # 5 subtask metrics have 2 series
    busy = got[(got["metric"] == "busyTimeMsPerSecond") & (got["subtask"] == 1)]
    assert set(busy["vertex"]) == {"map"} and busy["ts_ms"].is_monotonic_increasing
    row = busy.iloc[7]
    assert row["value"] == FakePrometheus.value("busyTimeMsPerSecond", row["ts_ms"] / 1000, 1)
    assert set(got.loc[got["metric"] == "cpuLoad", "subtask"]) == {-1}
    assert all(h == "Bearer s3cret-token" for h in prom.headers)
    assert 'job_name=~"demo"' in prom.requests[0]["query"]  # Flink's reporter writes "-" and "." as "_": both match


def test_5xx_is_retried_by_urllib3_then_succeeds(prom, tmp_path):
    prom.fail_next = [503, 502, 500]
    client = client_for(prom.url, retries=4)
    extract_prometheus(client, RawSink(Lake(tmp_path)), job="demo", start_ms=START, end_ms=START + 5_000)
    assert client.attempts == 3 + len(METRICS) == len(prom.requests)
    assert all(h == "Bearer s3cret-token" for h in prom.headers), "every retry carries the credentials"


def test_gives_up_naming_attempts_without_leaking_the_token(prom, tmp_path):
    prom.fail_next = [503] * 10
    with pytest.raises(ExtractError) as err:
        extract_prometheus(
            client_for(prom.url, retries=2), RawSink(Lake(tmp_path)), job="demo", start_ms=START, end_ms=START + 5_000
        )
    msg = str(err.value)
    assert "gave up after 3 attempts" in msg and "HTTP 503" in msg and "s3cret" not in msg
    assert len(prom.requests) == 3
    assert not (tmp_path / "raw").exists()  # nothing half-written


def test_a_hanging_prometheus_is_bounded_by_timeout_and_retries(tmp_path):
    """A server that accepts and never answers: each try ends at the read timeout, the call after
    ``retries + 1`` tries, so an extract cannot hang."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(8)  # the kernel accepts; nobody reads or answers
    try:
        url = f"http://127.0.0.1:{server.getsockname()[1]}"
        client = client_for(url, timeout_s=0.5, retries=1)
        began = time.monotonic()
        with pytest.raises(ExtractError, match=r"gave up after 2 attempts; last: ReadTimeoutError") as err:
            extract_prometheus(client, RawSink(Lake(tmp_path)), job="demo", start_ms=START, end_ms=START + 5_000)
        took = time.monotonic() - began
        assert 1.0 <= took < 5.0, f"two 0.5 s tries took {took:.1f} s"
        assert "s3cret" not in str(err.value)
    finally:
        server.close()


def test_a_refused_connection_is_one_line_after_the_retries(tmp_path):
    probe = socket.socket()
    probe.bind(("127.0.0.1", 0))
    port = probe.getsockname()[1]
    probe.close()  # nothing listens there now
    with pytest.raises(ExtractError, match=r"gave up after 3 attempts; last: NewConnectionError"):
        extract_prometheus(
            client_for(f"http://127.0.0.1:{port}", retries=2),
            RawSink(Lake(tmp_path)),
            job="demo",
            start_ms=START,
            end_ms=START + 5_000,
        )


def test_bad_query_fails_at_once_with_prometheus_error_text(prom, tmp_path):
    prom.fail_next = [400]
    with pytest.raises(ExtractError, match=r"HTTP 400: bad_data: scripted 400") as err:
        extract_prometheus(client_for(prom.url), RawSink(Lake(tmp_path)), job="demo", start_ms=START, end_ms=START + 5_000)
    assert "query=" in str(err.value) and len(prom.requests) == 1


def test_missing_subtask_label_is_named(tmp_path):
    prom = FakePrometheus(drop_label="subtask_index")
    try:
        with pytest.raises(
            ExtractError, match=r"numRecordsInPerSecond .* lacks label 'subtask_index'; labels present: \['task_name'\]"
        ):
            extract_prometheus(client_for(prom.url), RawSink(Lake(tmp_path)), job="demo", start_ms=START, end_ms=START + 5_000)
    finally:
        prom.close()


def test_reextraction_with_other_chunks_replaces_never_duplicates(prom, tmp_path):
    lake = Lake(tmp_path)
    extract_prometheus(client_for(prom.url), RawSink(lake), job="demo", start_ms=START, end_ms=START + 600_000, chunk_s=300)
    first = lake.read_raw("demo")
    res = extract_prometheus(client_for(prom.url), RawSink(lake), job="demo", start_ms=START, end_ms=START + 600_000, chunk_s=600)
    again = lake.read_raw("demo")
    assert len(res.files) == 1 and len(list((tmp_path / "raw").rglob("*.parquet"))) == 1
    assert again.equals(first)


def test_sink_keeps_the_part_of_an_overlapping_file_outside_the_chunk(prom, tmp_path):
    lake = Lake(tmp_path)
    extract_prometheus(client_for(prom.url), RawSink(lake), job="demo", start_ms=START, end_ms=START + 120_000, chunk_s=3600)
    before = lake.read_raw("demo")
    extract_prometheus(
        client_for(prom.url), RawSink(lake), job="demo", start_ms=START + 60_000, end_ms=START + 90_000, chunk_s=60
    )
    after = lake.read_raw("demo")
    assert len(after) == len(before) and after.sort_values(list(after.columns)).reset_index(drop=True).equals(
        before.sort_values(list(before.columns)).reset_index(drop=True)
    )


def test_endpoint_from_env_hides_secrets_and_refuses_userinfo():
    ep = endpoint_from_env(
        {
            "FLINKTUNE_PROMETHEUS_URL": "https://prom.example:9090/p",
            "FLINKTUNE_PROMETHEUS_USER": "u",
            "FLINKTUNE_PROMETHEUS_PASSWORD": "pw-secret",
        }
    )
    assert "pw-secret" not in repr(ep) and ep.headers()["Authorization"].startswith("Basic ")
    with pytest.raises(EndpointError, match="not in the URL") as err:
        PrometheusEndpoint("http://u:pw-secret@prom:9090")
    assert "pw-secret" not in str(err.value)
    with pytest.raises(EndpointError, match="FLINKTUNE_PROMETHEUS_URL"):
        endpoint_from_env({})


def test_job_entry_point_reads_the_url_from_the_environment(prom, settings, monkeypatch):
    monkeypatch.setenv("FLINKTUNE_PROMETHEUS_URL", prom.url)
    summary = job_extract.run(job="demo", source="prometheus", start_ms=START, end_ms=START + 10_000, settings=settings)
    assert summary["rows"] == 10 * (len(METRICS) - 1 + 5) and summary["chunks"] == 1
    json.dumps(summary)
    with pytest.raises(ValueError, match=r"jobs.simulate"):
        job_extract.run(job="demo", source="twin", start_ms=START, end_ms=START + 10_000, settings=settings)


def test_the_connection_named_in_the_settings_is_used_when_no_conn_id_is_passed(monkeypatch):
    # Production's scheduled ingest passes no conn_id: FLINKTUNE_PROMETHEUS_CONN_ID names the Airflow connection.
    monkeypatch.setenv("AIRFLOW_CONN_PROM_FROM_SETTINGS", "http://prom.example:9091/?token=tok-secret")
    env = {"FLINKTUNE_PROMETHEUS_CONN_ID": "prom_from_settings", "FLINKTUNE_PROMETHEUS_URL": "http://other:9090"}
    ep = resolve_endpoint(None, env)
    assert ep.url == "http://prom.example:9091" and ep.headers() == {"Authorization": "Bearer tok-secret"}
    assert resolve_endpoint(None, {"FLINKTUNE_PROMETHEUS_URL": "http://other:9090"}).url == "http://other:9090"
    with pytest.raises(EndpointError, match="'missing_conn'"):
        resolve_endpoint(None, {"FLINKTUNE_PROMETHEUS_CONN_ID": "missing_conn"})
