"""collect_flink_rest: the real RestMetricsSource polls a Flink-REST-shaped server on 127.0.0.1 under a
manual clock; closed chunks land in the lake as raw rows, a REST outage shows as missing samples."""

from __future__ import annotations

import threading
import urllib.parse
from http.server import ThreadingHTTPServer

import pytest
from json_http import JsonHandler

from flinktune.clock import ManualClock
from flinktune.extract.sink import RawSink
from flinktune.extract.sources import extract_from_source
from flinktune.lake import Lake
from flinktune.localflink.rest_extract import collect_flink_rest, rest_source

T0 = 1_714_521_600  # 2024-05-01T00:00Z, seconds


class FakeFlinkRest:
    """The REST answers RestMetricsSource asks for, for one RUNNING job "demo" with one vertex of 2 subtasks."""

    def __init__(self) -> None:
        self.down = False
        outer = self

        class Handler(JsonHandler):
            def do_GET(self):
                if outer.down:
                    return self._send(503, {"errors": ["JobManager restarting"]})
                url = urllib.parse.urlsplit(self.path)
                self._send(200, outer.answer(url.path, dict(urllib.parse.parse_qsl(url.query))))

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.port = self.server.server_port

        self.listings = 0  # answers to the gauge listing; ``partial_first`` of them lack offeredRate
        self.partial_first = 0

    def answer(self, path: str, q: dict[str, str]) -> object:
        if path == "/overview":
            return {"taskmanagers": 1, "slots-total": 2}
        if path == "/jobs/overview":
            return {"jobs": [{"jid": "j1", "name": "demo", "state": "RUNNING", "start-time": 1}]}
        if path == "/jobs/j1":
            return {"state": "RUNNING", "vertices": [{"id": "v1", "name": "map", "parallelism": 2}]}
        if path == "/jobs/j1/vertices/v1/subtasks/metrics":
            self.listings += 1
            if self.listings <= self.partial_first:  # listed while the source's open() was registering its gauges
                return [{"id": "Source.pendingRecords"}, {"id": "numRecordsIn"}]
            return [{"id": "Source.offeredRate"}, {"id": "Source.pendingRecords"}, {"id": "numRecordsIn"}]
        if path == "/jobs/j1/vertices/v1/metrics":
            return [{"id": i, "value": str(100.0 + int(i.split(".")[0]))} for i in q["get"].split(",")]
        if path == "/jobs/j1/checkpoints":
            return {"latest": {"completed": {"end_to_end_duration": 120, "state_size": 4096}}}
        if path == "/jobs/j1/metrics":
            return [{"id": "numRestarts", "value": "0"}]
        if path == "/taskmanagers":
            return {"taskmanagers": [{"id": "tm1"}]}
        if path == "/taskmanagers/tm1/metrics":
            return [
                {"id": "Status.JVM.CPU.Load", "value": "0.25"},
                {"id": "Status.JVM.Memory.Heap.Used", "value": str(256 * 2**20)},
            ]
        raise AssertionError(f"unexpected REST path {path}")

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def flink():
    f = FakeFlinkRest()
    yield f
    f.close()


def test_polls_until_the_end_and_writes_closed_chunks(flink, tmp_path):
    clock = ManualClock(T0)
    source = rest_source(flink.port, "demo", clock=clock)
    lake = Lake(tmp_path)

    def sleep(s: float) -> None:
        clock.advance(s)
        flink.down = T0 + 300 <= clock.now() < T0 + 310  # a 10 s outage at the start of the second chunk

    res = collect_flink_rest(
        source, RawSink(lake), start_ms=T0 * 1000, end_ms=(T0 + 600) * 1000, interval_s=2.0, chunk_s=300, clock=clock, sleep=sleep
    )
    assert res.chunks == 2 and len(res.files) == 2
    got = lake.read_raw("demo")
    seconds = sorted(set(got["ts_ms"] // 1000 - T0))
    assert seconds[:3] == [0, 2, 4] and 300 not in seconds and 308 not in seconds and 310 in seconds
    assert len(source.errors) == 5 and "HTTP 503" in source.errors[0]
    busy = got[got["metric"] == "busyTimeMsPerSecond"]
    assert set(zip(busy["vertex"], busy["subtask"])) == {("map", 0), ("map", 1)}
    assert set(busy["value"]) == {100.0, 101.0}
    assert got.loc[got["metric"] == "workloadRate", "value"].iloc[0] == 201.0  # operator gauges summed over subtasks
    assert got.loc[got["metric"] == "heapUsedMb", "value"].iloc[0] == 256.0
    assert "configParallelism" in res.missing_metrics  # no config provider given


def test_extract_from_the_buffer_is_idempotent(flink, tmp_path):
    clock = ManualClock(T0)
    source = rest_source(flink.port, "demo", clock=clock)
    for _ in range(10):
        source.sample()
        clock.advance(1)
    lake = Lake(tmp_path)
    first = extract_from_source(source, RawSink(lake), job="demo", start_ms=T0 * 1000, end_ms=(T0 + 10) * 1000, name="flink-rest")
    again = extract_from_source(source, RawSink(lake), job="demo", start_ms=T0 * 1000, end_ms=(T0 + 10) * 1000, name="flink-rest")
    assert first.rows == again.rows == len(lake.read_raw("demo")) > 0
    assert len(list(tmp_path.rglob("*.parquet"))) == 1


def test_a_gauge_missing_from_the_first_listing_is_found_when_listed_again(flink):
    flink.partial_first = 1
    clock = ManualClock(T0)
    source = rest_source(flink.port, "demo", clock=clock)
    seen = []
    for _ in range(40):
        sample = source.sample()
        seen.append("workloadRate" in set(sample["metric"]))
        clock.advance(1)
    # Listed at 0 s without offeredRate, and again 30 s later: the offered rate is read from then on.
    assert seen[:30] == [False] * 30 and all(seen[30:])
    assert flink.listings == 2 and "pendingRecords" in set(sample["metric"])
