"""Serve raw-schema samples (e.g. the twin's) as Prometheus metrics, the way Flink's reporter names them.

Use :class:`SampleExporter` to put a real Prometheus in front of the twin (demos, the Prometheus
integration test): give it a frame of one job's samples at 1 s; on every scrape it serves the
samples of the frame's second ``(now - started) mod length`` under :data:`METRICS`' Prometheus
names, with labels ``job_name`` (+ ``task_name``, ``subtask_index`` for subtask metrics) and an
explicit timestamp of the current whole second, and records what it served in :attr:`served` so a
test can compare an extraction with it. ``jobRunning`` is served as the uptime metric (0 or 1).
"""

from __future__ import annotations

import threading
from typing import Any

import pandas as pd

from flinktune.clock import Clock, SystemClock
from flinktune.extract.prometheus import LabelMap
from flinktune.metrics.schema import METRICS

__all__ = ["SampleExporter"]


class SampleExporter:
    """A prometheus_client collector and HTTP server over a frame of samples (bind 127.0.0.1 only)."""

    def __init__(self, frame: pd.DataFrame, *, job: str, clock: Clock | None = None, labels: LabelMap = LabelMap()) -> None:
        if frame.empty:
            raise ValueError("SampleExporter needs at least one sample")
        self.job = job
        self.clock = clock or SystemClock()
        self.labels = labels
        secs = (frame["ts_ms"].to_numpy() // 1000).astype("int64")
        frame = frame.assign(_sec=secs - secs.min())
        self._length = int(frame["_sec"].max()) + 1
        self._by_second = {int(s): g for s, g in frame.groupby("_sec", sort=True)}
        self._t0 = int(self.clock.now())
        #: (metric, vertex, subtask, ts_ms) -> value, for every sample served.
        self.served: dict[tuple[str, str, int, int], float] = {}
        self._lock = threading.Lock()
        self._server: Any = None

    def collect(self):
        from prometheus_client.core import GaugeMetricFamily

        now_s = int(self.clock.now())
        rows = self._by_second.get((now_s - self._t0) % self._length)
        if rows is None:
            return
        families: dict[str, GaugeMetricFamily] = {}
        served = {}
        for metric, vertex, subtask, value in zip(rows["metric"], rows["vertex"], rows["subtask"], rows["value"]):
            info = METRICS[metric]
            names = [self.labels.job] + ([self.labels.vertex, self.labels.subtask] if info.level == "subtask" else [])
            fam = families.get(metric)
            if fam is None:
                fam = families[metric] = GaugeMetricFamily(info.prometheus, info.description, labels=names)
            values = [self.job] + ([str(vertex), str(int(subtask))] if info.level == "subtask" else [])
            fam.add_metric(values, float(value), timestamp=now_s)
            key_vertex, key_sub = (str(vertex), int(subtask)) if info.level == "subtask" else ("", -1)
            served[(metric, key_vertex, key_sub, now_s * 1000)] = float(value)
        with self._lock:
            self.served.update(served)
        yield from families.values()

    def start(self, port: int = 0) -> int:
        """Serve ``/metrics`` on 127.0.0.1 in a daemon thread; returns the port."""
        from prometheus_client import CollectorRegistry, start_http_server

        registry = CollectorRegistry(auto_describe=False)
        registry.register(self)
        self._server, _ = start_http_server(port, addr="127.0.0.1", registry=registry)
        return int(self._server.server_port)

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
