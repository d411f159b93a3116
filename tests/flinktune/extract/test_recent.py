"""A decision's fresh view against a real Prometheus (Debian's package) scraping the twin's metrics: the lake
holds the first part of the window, Prometheus the rest; the merged view must equal what the ingest writes
to the lake for the whole window, and with Prometheus stopped the view is the lake's part and says so.

Needs the ``prometheus`` binary (PATH or FLINKTUNE_PROMETHEUS_BIN); skips naming why without it.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
import urllib.request

import pytest

from flinktune.clock import ManualClock
from flinktune.config_space import Configuration
from flinktune.decision.fresh import FreshMetricsSource
from flinktune.extract.endpoint import PrometheusEndpoint
from flinktune.extract.exporter import SampleExporter
from flinktune.extract.prometheus import PrometheusClient, extract_prometheus
from flinktune.extract.recent import PrometheusRecent, fresh_metrics_source
from flinktune.extract.sink import RawSink
from flinktune.lake import Lake, LakeMetricsSource
from flinktune.settings import load_settings
from flinktune.twin.profile import ClusterProfile
from flinktune.twin.simulator import TwinJob

JOB = "twin-fresh"
_KEY = ["metric", "vertex", "subtask", "ts_ms"]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_ready(url: str, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(url + "/-/ready", timeout=1) as r:
                if r.status == 200:
                    return
        except OSError:
            pass
        time.sleep(0.2)
    raise AssertionError(f"Prometheus at {url} not ready after {timeout_s} s")


@pytest.mark.slow
def test_lake_plus_prometheus_equals_the_ingest_of_the_whole_window_and_a_stopped_prometheus_is_said(tmp_path):
    binary = os.environ.get("FLINKTUNE_PROMETHEUS_BIN") or shutil.which("prometheus")
    if not binary:
        pytest.skip("no prometheus binary: apt-get install prometheus, or set FLINKTUNE_PROMETHEUS_BIN")
    twin = TwinJob(ClusterProfile.default(), Configuration(2, 1, 1.0, 1024, 10), job=JOB, seed=5, detail="subtask")
    exporter = SampleExporter(twin.run([20_000.0] * 60), job=JOB)
    port, prom_port = exporter.start(), _free_port()
    (tmp_path / "prometheus.yml").write_text(
        "global: {scrape_interval: 1s, scrape_timeout: 900ms}\n"
        f"scrape_configs:\n  - job_name: twin\n    honor_timestamps: true\n    static_configs: [{{targets: ['127.0.0.1:{port}']}}]\n"
    )
    url = f"http://127.0.0.1:{prom_port}"
    proc = subprocess.Popen([binary, f"--config.file={tmp_path / 'prometheus.yml'}", f"--storage.tsdb.path={tmp_path / 'tsdb'}",
                             f"--web.listen-address=127.0.0.1:{prom_port}", "--log.level=warn"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
    try:
        _wait_ready(url, 20)
        deadline = time.monotonic() + 40
        while len(ts := sorted({k[3] for k in exporter.served})) < 10 and time.monotonic() < deadline:
            time.sleep(1)
        assert len(ts) >= 10, f"only {len(ts)} scrapes in 40 s"
        start, end = ts[1], ts[-1] + 1  # whole seconds Prometheus has surely ingested
        mid = start + ((end - start) // 2000) * 1000
        lake, whole = Lake(tmp_path / "lake"), Lake(tmp_path / "whole")
        client = PrometheusClient(PrometheusEndpoint(url))
        extract_prometheus(client, RawSink(lake), job=JOB, start_ms=start, end_ms=mid, chunk_s=60)  # the ingest so far
        extract_prometheus(client, RawSink(whole), job=JOB, start_ms=start, end_ms=end, chunk_s=60)  # what it will write
        clock = ManualClock((end - 1) / 1000)
        fresh = FreshMetricsSource(LakeMetricsSource(lake), PrometheusRecent(PrometheusEndpoint(url)), clock)
        got = fresh.fetch(JOB, start, end)
    finally:
        proc.terminate()
        proc.wait(timeout=15)
        exporter.stop()
    assert fresh.note is None and fresh.served["lake"] > 0 and fresh.served["recent"] > 0, (fresh.note, fresh.served)
    expected = whole.read_raw(JOB, start, end)
    assert len(got) == len(expected) and int(got["ts_ms"].max()) == end - 1
    merged = got.merge(expected, on=_KEY, suffixes=("", "_ingest"), validate="one_to_one")
    assert len(merged) == len(expected) and (merged["value"] == merged["value_ingest"]).all()

    # Prometheus is gone: the lake's part alone, and the note says why and how old the data is.
    stopped = FreshMetricsSource(
        LakeMetricsSource(lake), PrometheusRecent(PrometheusEndpoint(url), timeout_s=1.0, retries=0), clock
    )
    alone = stopped.fetch(JOB, start, end)
    assert int(alone["ts_ms"].max()) == mid - 1000 and len(alone) == len(lake.read_raw(JOB, start, end))
    assert stopped.note is not None and stopped.note.startswith(f"Prometheus {url} unreachable (")
    assert f"decided on the lake alone, newest sample {(end - 1 - (mid - 1000)) / 1000:.0f} s old" in stopped.note


def test_a_decide_run_reads_prometheus_only_where_the_ingest_settings_name_one(tmp_path, monkeypatch):
    for name in ("FLINKTUNE_PROMETHEUS_URL", "FLINKTUNE_PROMETHEUS_CONN_ID"):
        monkeypatch.delenv(name, raising=False)
    lake = Lake(tmp_path / "lake")
    assert isinstance(fresh_metrics_source(load_settings(), lake), LakeMetricsSource)
    monkeypatch.setenv("FLINKTUNE_PROMETHEUS_URL", "http://127.0.0.1:9")
    monkeypatch.setenv("FLINKTUNE_PROMETHEUS_NAMES", "flink-operator-gauges")
    source = fresh_metrics_source(load_settings(), lake)
    assert isinstance(source, FreshMetricsSource) and isinstance(source.recent, PrometheusRecent)
    assert source.recent.names == "flink-operator-gauges"
    with pytest.raises(ValueError, match="unknown Prometheus query preset 'kafka'"):
        PrometheusRecent(names="kafka")
