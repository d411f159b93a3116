"""A :class:`~flinktune.decision.stages.MetricsSource` over Flink's REST API (raw schema rows).

Use :class:`RestMetricsSource` for a job on the local cluster: call :meth:`sample` every 1-5 s
(or :meth:`start` a background poller) and :meth:`fetch` returns the buffered samples of a time
range, exactly like the Prometheus and twin sources. Continuous polling is not optional: Flink's
REST metrics are a cache refreshed only when asked, so sparse reads are
stale. Per-subtask values come from ``/vertices/<vid>/metrics?get=<i>.<name>`` (the aggregated
``subtasks/metrics`` endpoint answers nothing once an operator-scoped name is in the query).

Rows per sample: per subtask ``numRecordsIn/OutPerSecond``, ``busy/backPressured/idleTimeMsPerSecond``;
job level ``workloadRate`` (the offered rate the paced source reports), ``pendingRecords`` (its
backlog), ``latencyP50/P95/P99Ms`` (the job's latency meter, worst subtask), ``cpuLoad`` (cores),
``heapUsedMb``, checkpoint duration and size, ``numRestarts``, ``jobRunning``, ``taskManagers``,
``taskSlotsTotal`` and the ``config*`` knobs in force (from ``config_provider``).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable

import pandas as pd

from flinktune.clock import Clock, SystemClock
from flinktune.config_space import Configuration
from flinktune.localflink.jobcontrol import JobControl
from flinktune.localflink.rest import RestError
from flinktune.metrics.schema import CONFIG_METRICS, RAW_COLUMNS, empty_frame, validate_frame

__all__ = ["TASK_METRICS", "RestMetricsSource"]

TASK_METRICS = (
    "numRecordsInPerSecond",
    "numRecordsOutPerSecond",
    "busyTimeMsPerSecond",
    "backPressuredTimeMsPerSecond",
    "idleTimeMsPerSecond",
)
#: Operator-scoped gauges of the benchmark job: suffix -> (raw metric, how subtasks combine).
_OPERATOR_GAUGES = {
    "offeredRate": ("workloadRate", "sum"),
    "pendingRecords": ("pendingRecords", "sum"),
    "latencyP50Ms": ("latencyP50Ms", "max"),
    "latencyP95Ms": ("latencyP95Ms", "max"),
    "latencyP99Ms": ("latencyP99Ms", "max"),
}
_RELIST_S = 30.0  # how often a vertex's gauge names are listed again (one REST call per vertex)


class RestMetricsSource:
    """Samples one job (by name) into an in-memory raw-schema buffer; ``fetch`` reads a time range of it."""

    def __init__(
        self,
        control: JobControl,
        *,
        job: str | None = None,
        clock: Clock | None = None,
        config_provider: Callable[[], Configuration] | None = None,
        keep_s: float = 7200.0,
    ) -> None:
        self.control = control
        self.rest = control.rest
        self.job = job or control.spec.name
        self.clock = clock or SystemClock()
        self.config_provider = config_provider
        self.keep_s = keep_s
        self._frames: list[pd.DataFrame] = []
        self._lock = threading.Lock()
        self._names: dict[tuple[str, str], tuple[list[str], float | None]] = {}  # (job, vertex) -> (gauges, listed at)
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        self.errors: list[str] = []

    # -- sampling --------------------------------------------------------------------------------
    def _operator_names(self, jid: str, vid: str) -> list[str]:
        """The vertex's operator-scoped gauges, listed again every ``_RELIST_S``: a listing taken while the
        source's ``open()`` was registering them can hold some and not the rest (one loaded CI run had
        ``pendingRecords`` for a whole minute and never ``offeredRate``), and one vertex may never have them all."""
        key, now = (jid, vid), self.clock.now()
        names, listed_at = self._names.get(key, ([], None))
        if listed_at is None or now - listed_at >= _RELIST_S:
            listing = [m["id"] for m in self.rest.get(f"/jobs/{jid}/vertices/{vid}/subtasks/metrics")]
            names = [n for n in listing if "." in n and n.rsplit(".", 1)[1] in _OPERATOR_GAUGES]
            # A new job's first answers can be empty: ask again at the next sample, not after _RELIST_S.
            self._names[key] = (names, now if names else None)
        return names

    def sample(self) -> pd.DataFrame:
        """Read the job's metrics now, buffer them, and return this sample's rows."""
        ts = int(self.clock.now() * 1000)
        rows: list[tuple[str, str, int, float]] = []  # (metric, vertex, subtask, value)
        job_values: dict[str, list[float]] = {}
        overview = self.rest.get("/overview")
        rows += [
            ("taskManagers", "", -1, float(overview.get("taskmanagers", 0))),
            ("taskSlotsTotal", "", -1, float(overview.get("slots-total", 0))),
        ]
        jid = self.control.job_id()
        details = self.rest.get(f"/jobs/{jid}") if jid else {}
        rows.append(("jobRunning", "", -1, 1.0 if details.get("state") == "RUNNING" else 0.0))
        if jid and details.get("state") == "RUNNING":
            for v in details.get("vertices", []):
                vid, p = v["id"], int(v.get("parallelism", 1))
                ops = self._operator_names(jid, vid)
                wanted = [f"{i}.{m}" for i in range(p) for m in (*TASK_METRICS, *ops)]
                for m in self.rest.get(f"/jobs/{jid}/vertices/{vid}/metrics?get={','.join(wanted)}"):
                    idx, name = m["id"].split(".", 1)
                    try:
                        value = float(m["value"])
                    except (TypeError, ValueError):
                        continue
                    if name in TASK_METRICS:
                        rows.append((name, v["name"], int(idx), value))
                    else:
                        raw, _ = _OPERATOR_GAUGES[name.rsplit(".", 1)[1]]
                        job_values.setdefault(raw, []).append(value)
            for raw, values in job_values.items():
                how = next(h for r, h in _OPERATOR_GAUGES.values() if r == raw)
                rows.append((raw, "", -1, float(sum(values) if how == "sum" else max(values))))
            rows += self._job_level(jid)
        rows += self._taskmanager_level()
        if self.config_provider is not None:
            cfg = self.config_provider()
            rows += [(metric, "", -1, float(getattr(cfg, knob))) for knob, metric in CONFIG_METRICS.items()]
        df = pd.DataFrame(rows, columns=["metric", "vertex", "subtask", "value"])
        df.insert(0, "job", self.job)
        df["ts_ms"] = ts
        df = validate_frame(df[list(RAW_COLUMNS)], where=f"REST sample of job {self.job!r}")
        with self._lock:
            self._frames.append(df)
            cutoff = ts - int(self.keep_s * 1000)
            while self._frames and int(self._frames[0]["ts_ms"].iloc[0]) < cutoff:
                self._frames.pop(0)
        return df

    def _job_level(self, jid: str) -> list[tuple[str, str, int, float]]:
        out: list[tuple[str, str, int, float]] = []
        latest = (self.rest.get(f"/jobs/{jid}/checkpoints").get("latest") or {}).get("completed") or {}
        if latest:
            out.append(("lastCheckpointDurationMs", "", -1, float(latest.get("end_to_end_duration", 0))))
            out.append(("lastCheckpointSizeBytes", "", -1, float(latest.get("state_size", 0))))
        for m in self.rest.get(f"/jobs/{jid}/metrics?get=numRestarts"):
            out.append(("numRestarts", "", -1, float(m["value"])))
        return out

    def _taskmanager_level(self) -> list[tuple[str, str, int, float]]:
        cores = float(os.cpu_count() or 1)
        cpu = heap = 0.0
        for tm in self.rest.get("/taskmanagers").get("taskmanagers", []):
            for m in self.rest.get(f"/taskmanagers/{tm['id']}/metrics?get=Status.JVM.CPU.Load,Status.JVM.Memory.Heap.Used"):
                if m["id"] == "Status.JVM.CPU.Load":
                    cpu += float(m["value"]) * cores  # a fraction of the whole machine
                else:
                    heap += float(m["value"]) / 2**20
        return [("cpuLoad", "", -1, cpu), ("heapUsedMb", "", -1, heap)]

    # -- the MetricsSource protocol --------------------------------------------------------------
    def fetch(self, job: str, start_ms: int, end_ms: int) -> pd.DataFrame:
        """Buffered samples of ``job`` with ``start_ms <= ts_ms < end_ms`` (raw schema)."""
        with self._lock:
            frames = list(self._frames)
        if not frames:
            return empty_frame()
        df = pd.concat(frames, ignore_index=True)
        return df[(df["job"] == job) & (df["ts_ms"] >= start_ms) & (df["ts_ms"] < end_ms)].reset_index(drop=True)

    # -- background polling ------------------------------------------------------------------------
    def start(self, interval_s: float = 2.0) -> None:
        """Poll every ``interval_s`` in a daemon thread until :meth:`stop`; REST errors are kept in ``errors``."""
        if self._thread is not None:
            return
        self._stop.clear()

        def loop() -> None:
            while not self._stop.wait(interval_s):
                try:
                    self.sample()
                except RestError as exc:  # a restarting job or JM: keep polling, the gap shows as staleness
                    self.errors.append(str(exc))
                    self.errors = self.errors[-100:]

        self._thread = threading.Thread(target=loop, name=f"rest-metrics-{self.job}", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=30)
            self._thread = None
