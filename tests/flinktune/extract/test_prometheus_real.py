"""A real Prometheus (Debian's package) scrapes the twin's metrics served by prometheus-client; the
extractor pulls a range through query_range and it must equal what was served, sample for sample.

Needs the ``prometheus`` binary (PATH or FLINKTUNE_PROMETHEUS_BIN): ``scripts/bootstrap.sh`` installs
Debian's package where it runs as root with apt-get; elsewhere the test skips naming why.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
import urllib.request

import pytest

from flinktune.config_space import Configuration
from flinktune.extract.endpoint import PrometheusEndpoint
from flinktune.extract.exporter import SampleExporter
from flinktune.extract.prometheus import PrometheusClient, extract_prometheus
from flinktune.extract.sink import RawSink
from flinktune.lake import Lake
from flinktune.metrics.schema import METRICS
from flinktune.twin.profile import ClusterProfile
from flinktune.twin.simulator import TwinJob

pytestmark = pytest.mark.slow
JOB = "twin-prom"


def _prometheus_binary() -> str:
    found = os.environ.get("FLINKTUNE_PROMETHEUS_BIN") or shutil.which("prometheus")
    if not found:
        pytest.skip(
            "no prometheus binary: scripts/bootstrap.sh installs Debian's package where it runs as root, "
            "or set FLINKTUNE_PROMETHEUS_BIN"
        )
    return found


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


def test_extract_from_a_real_prometheus_matches_what_was_served(tmp_path):
    binary = _prometheus_binary()
    twin = TwinJob(ClusterProfile.default(), Configuration(2, 1, 1.0, 1024, 10), job=JOB, seed=3, detail="subtask")
    frame = twin.run([20_000.0] * 60)
    exporter = SampleExporter(frame, job=JOB)
    port = exporter.start()
    prom_port = _free_port()
    (tmp_path / "prometheus.yml").write_text(
        "global: {scrape_interval: 1s, scrape_timeout: 900ms}\n"
        "scrape_configs:\n"
        f"  - job_name: twin\n    honor_timestamps: true\n    static_configs: [{{targets: ['127.0.0.1:{port}']}}]\n"
    )
    # The child keeps its own copy of the log's descriptor; ours closes once it has started.
    with open(tmp_path / "prometheus.log", "wb") as log:
        proc = subprocess.Popen(
            [binary, f"--config.file={tmp_path / 'prometheus.yml'}", f"--storage.tsdb.path={tmp_path / 'tsdb'}",
             f"--web.listen-address=127.0.0.1:{prom_port}", "--log.level=warn"],
            stdout=subprocess.DEVNULL, stderr=log,
        )  # fmt: skip
    try:
        url = f"http://127.0.0.1:{prom_port}"
        _wait_ready(url, 20)
        time.sleep(14)
        served = dict(exporter.served)
        ts = sorted({k[3] for k in served})
        assert len(ts) >= 8, f"only {len(ts)} scrapes in 14 s; log: {(tmp_path / 'prometheus.log').read_text()[-2000:]}"
        start, end = ts[1], ts[-1] + 1  # whole seconds Prometheus has surely ingested
        lake = Lake(tmp_path / "lake")
        result = extract_prometheus(
            PrometheusClient(PrometheusEndpoint(url)), RawSink(lake), job=JOB, start_ms=start, end_ms=end, chunk_s=60
        )
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        exporter.stop()
    assert proc.returncode is not None
    got = lake.read_raw(JOB, start, end)
    assert result.missing_metrics == [] and result.rows == len(got) > 0
    assert set(got["metric"]) == set(METRICS)
    # At each evaluation instant Prometheus answers the latest sample at or before it: compare with that.
    served_ts = {}
    for (metric, vertex, subtask, t), value in served.items():
        served_ts.setdefault((metric, vertex, subtask), {})[t] = value
    series = {(m, v, int(s)) for m, v, s in zip(got["metric"], got["vertex"], got["subtask"])}
    assert series == set(served_ts), "the extracted (metric, vertex, subtask) series differ from those served"
    mismatches = []
    for metric, vertex, subtask, t, value in zip(got["metric"], got["vertex"], got["subtask"], got["ts_ms"], got["value"]):
        times = served_ts[(metric, vertex, int(subtask))]
        latest = max(x for x in times if x <= t)
        if abs(times[latest] - value) > 1e-9 * max(1.0, abs(value)):
            mismatches.append((metric, vertex, int(subtask), int(t), value, times[latest]))
    assert not mismatches, f"{len(mismatches)} samples differ from what was served, e.g. {mismatches[:3]}"
    per_series = got.groupby(["metric", "vertex", "subtask"]).size()
    assert (per_series == (end - 1 - start) // 1000 + 1).all()  # one sample per second of the range, every series
