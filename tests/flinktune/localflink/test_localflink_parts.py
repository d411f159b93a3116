"""Fast tests of the local-Flink parts that need no running cluster (no JVM is started)."""

from __future__ import annotations

import json
import socket
import subprocess
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path

import numpy as np
import pytest

from flinktune.config_space import ConfigSpace
from flinktune.localflink import (
    ClusterSpec,
    DistributionError,
    FlinkDistribution,
    FlinkRest,
    LocalFlinkCluster,
    PortTakenError,
    RateFile,
    RestError,
    find_distribution,
    free_port,
    rise_and_fall,
)
from flinktune.localflink.capacity import CapacitySurrogate


def _fake_dist(tmp_path: Path) -> FlinkDistribution:
    home = tmp_path / "flink"
    (home / "conf").mkdir(parents=True)
    (home / "bin").mkdir()
    (home / "conf" / "config.yaml").write_text(
        "env:\n  java:\n    opts:\n      all: --add-opens=java.base/java.lang=ALL-UNNAMED\n"
    )
    (home / "conf" / "log4j-console.properties").write_text("# log config\n")
    return FlinkDistribution(home=home, java=Path("/usr/bin/java"), java_major=17)


def test_missing_distribution_names_the_setup_script(tmp_path, monkeypatch):
    monkeypatch.delenv("FLINKTUNE_FLINK_HOME", raising=False)
    if not Path("/usr/bin/java").exists() and not __import__("shutil").which("java"):
        pytest.skip("no java: find_distribution stops at the Java check")
    with pytest.raises(DistributionError, match=r"setup_local_flink.sh"):
        find_distribution(venv=tmp_path / "no-venv")
    with pytest.raises(DistributionError, match=r"flink-dist-2.3.0.jar"):
        find_distribution(_fake_dist(tmp_path).home)


def test_taken_port_is_refused_before_anything_starts(tmp_path):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen(1)
        port = s.getsockname()[1]
        cluster = LocalFlinkCluster(tmp_path / "c", ClusterSpec(rest_port=port, rpc_port=free_port()), dist=_fake_dist(tmp_path))
        with pytest.raises(PortTakenError, match=f"port {port} \\(rest.port\\)"):
            cluster.up()
    assert not (tmp_path / "c" / "state.json").exists()


def test_config_binds_loopback_only_and_keeps_prometheus_off(tmp_path):
    cluster = LocalFlinkCluster(tmp_path / "c", ClusterSpec(rest_port=18081, rpc_port=16123), dist=_fake_dist(tmp_path))
    cluster._prepare()
    conf = dict(line.split(": ", 1) for line in (tmp_path / "c" / "conf" / "config.yaml").read_text().splitlines())
    for key in ("jobmanager.bind-host", "taskmanager.bind-host", "rest.bind-address", "rest.address", "jobmanager.rpc.address"):
        assert conf[key] == "127.0.0.1", key
    assert conf["rest.port"] == "18081" and conf["jobmanager.scheduler"] == "adaptive"
    assert not any(k.startswith("metrics.reporter") for k in conf)  # it would listen on all interfaces (P12)
    assert json.loads(conf["env.java.opts.all"]) == "--add-opens=java.base/java.lang=ALL-UNNAMED"
    assert (tmp_path / "c" / "conf" / "log4j-console.properties").exists()


def test_status_and_down_without_a_cluster(tmp_path):
    cluster = LocalFlinkCluster(tmp_path / "none", dist=_fake_dist(tmp_path))
    assert cluster.status()["running"] is False
    assert cluster.down() == []


def test_stop_process_never_kills_a_pid_that_is_not_this_clusters(tmp_path):
    other = subprocess.Popen(["sleep", "30"])
    try:
        LocalFlinkCluster(tmp_path / "c", dist=_fake_dist(tmp_path)).stop_process(other.pid, kill=True)
        assert other.poll() is None
    finally:
        other.kill()
        other.wait()


def test_rate_file_is_replaced_whole_and_rejects_bad_rates(tmp_path):
    rf = RateFile(tmp_path / "sub" / "rate.txt")
    rf.set(12345.5)
    assert rf.get() == 12345.5
    assert list((tmp_path / "sub").iterdir()) == [rf.path]  # no temp file left behind
    with pytest.raises(ValueError, match=r"rate.txt"):
        rf.set(-1)
    with pytest.raises(ValueError, match=r"rate.txt"):
        rf.set(float("nan"))
    assert rf.get() == 12345.5


def test_rise_and_fall_is_a_trapezoid():
    f = [rise_and_fall(t, low=10, high=100, duration_s=100, hold_frac=0.2) for t in (0, 20, 40, 50, 60, 80, 100, 120)]
    assert f == [10, pytest.approx(55), 100, 100, 100, pytest.approx(55), 10, 10]
    with pytest.raises(ValueError):
        rise_and_fall(1, low=1, high=2, duration_s=0)


class _Failing(BaseHTTPRequestHandler):
    def do_GET(self):
        body = json.dumps(
            {"errors": ["org.apache.flink.UnsupportedOperationException: The DefaultScheduler does not support it"]}
        ).encode()
        self.send_response(500)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


def test_rest_errors_name_the_call_status_and_flinks_reason():
    server = HTTPServer(("127.0.0.1", 0), _Failing)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        with pytest.raises(
            RestError, match=r"GET http://127.0.0.1:\d+/jobs/x/resource-requirements: HTTP 500: .*DefaultScheduler"
        ) as err:
            FlinkRest(server.server_address[1]).get("/jobs/x/resource-requirements")
        assert err.value.status == 500
    finally:
        server.shutdown()
    with pytest.raises(RestError, match="unreachable") as err:
        FlinkRest(free_port(), timeout_s=2).get("/overview")
    assert err.value.status == 0


def test_capacity_surrogate_separates_safe_from_overloaded():
    space = ConfigSpace(parallelism=(1, 2), task_slots=(1,), cpu=(1.0,), memory_mb=(1024,), checkpoint_interval_s=(10,))
    sur = CapacitySurrogate(
        space, {1: 10000.0, 2: 18000.0}, {1: 600.0, 2: 600.0}, recovery_s=12.0, cpu_core_s_per_record=1e-4, memory_used_mb=80.0
    )
    X = np.array([[0.0, 0, 0, 0, 0], [1.0, 0, 0, 0, 0]])
    ok = sur.predict(X, 5000).prob_le("latency_ms", 3000)
    assert ok[0] > 0.95 and ok[1] > 0.95
    hot = sur.predict(X, 12000).prob_le("latency_ms", 3000)
    assert hot[0] < 0.01 and hot[1] > 0.95
    assert sur.predict(X, 5000).median("recovery_s") == pytest.approx([12.0, 12.0])
    with pytest.raises(ValueError, match="parallelism 2"):
        CapacitySurrogate(space, {1: 1.0}, {1: 1.0}, 1.0, 1.0, 1.0)


def test_recovery_is_timed_from_a_windowed_rate_that_stale_reads_do_not_fool():
    from flinktune.localflink.failures import recovery_point

    # The job runs again at 5 s at half speed, restarts (counter reset) at 12 s when the replacement
    # TaskManager joins, and emits the full 50k rec/s from 14 s. Reads come from a cache refreshed
    # once a second and are polled every 1.5 s, so two-read rates swing between 33k and 67k.
    def true_count(t: float) -> float:
        return 25_000 * (t - 5) if t < 12 else 50_000 * (t - 14) if t >= 14 else 0.0

    polls = np.arange(5.0, 60.0, 1.5)
    counts = [true_count(np.floor(t)) for t in polls]
    pairwise = np.diff(counts) / 1.5
    assert (pairwise[pairwise > 0] < 40_000).any()  # what the old "3 stable polls" test tripped on
    at = recovery_point(polls, counts, 50_000, tolerance=0.2, window_s=8.0)
    # Full rate from 14 s; a window may start up to tolerance x window (1.6 s) early.
    assert at is not None and 12.0 <= at <= 17.0
    assert recovery_point(polls, counts, 70_000, tolerance=0.2) is None  # never at 56k+
    assert recovery_point(polls[:4], counts[:4], 50_000) is None  # too short to judge
    with pytest.raises(ValueError, match="3 times but 2 counts"):
        recovery_point([1.0, 2.0, 3.0], [1.0, 2.0], 10.0)
