"""Profiling deployments against a local API server that stores objects and validates them with the CRD."""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest
from json_http import JsonHandler
from k8s_fake_server import LocalApiServer

from flinktune.clock import ManualClock
from flinktune.config_space import Configuration
from flinktune.kubernetes import deployment_body, load_crd_schema
from flinktune.kubernetes.profiling import (
    OVERRIDES_ANNOTATION,
    PROFILE_LABEL,
    ProfilingError,
    ResourceBudget,
    profiling_deployment,
    run_profiling_deployment,
)  # fmt: skip
from flinktune.metrics.schema import PROFILING_COLUMNS, RAW_COLUMNS

SCHEMA = load_crd_schema()
PREFIX = "/apis/flink.apache.org/v1beta1/namespaces/flink/flinkdeployments"
CONFIG = Configuration(8, 2, 2.0, 2048, 30)


def production():
    obj = deployment_body("ysb", "flink", Configuration(24, 1, 1.0, 4096, 10), image="flink:1.20", jar_uri="local:///opt/job.jar")
    obj["spec"]["job"]["args"] = ["--input-topic", "ads", "--output-topic", "ads-out", "--group-id=ysb"]
    obj["spec"]["job"]["initialSavepointPath"] = "s3://sp/ysb-1"
    overrides = {"args": {"--output-topic": "{name}-out", "--group-id": "{name}"}}
    obj["metadata"].update(
        resourceVersion="7", generation=3, uid="u-1", annotations={OVERRIDES_ANNOTATION: json.dumps(overrides)}
    )
    obj["status"] = {"lifecycleState": "STABLE", "jobStatus": {"state": "RUNNING"}}
    return obj


class FakeApiServer(LocalApiServer):
    """GET/POST/DELETE of FlinkDeployments in namespace ``flink``; a created object turns
    ``final_state`` after ``gets_to_start`` GETs; bodies failing the CRD get a 422."""

    def __init__(self, objects, *, final_state="RUNNING", gets_to_start=2):
        self.objects, self.final_state, self.gets_to_start = (
            {o["metadata"]["name"]: o for o in objects},
            final_state,
            gets_to_start,
        )
        self.created, self.deleted, self.rejected, self.gets = [], [], [], {}
        srv = self

        class Handler(JsonHandler):
            def _name(self):
                return self.path.split("?")[0][len(PREFIX) + 1 :] if self.path.startswith(PREFIX + "/") else None

            def do_GET(self):
                name = self._name()
                if name not in srv.objects:
                    return self._send(404, {"kind": "Status", "code": 404, "reason": "NotFound"})
                obj = srv.objects[name]
                if name in {o["metadata"]["name"] for o in srv.created}:
                    srv.gets[name] = srv.gets.get(name, 0) + 1
                    if srv.gets[name] >= srv.gets_to_start:
                        failed = srv.final_state == "FAILED"
                        obj["status"] = {"lifecycleState": "DEPLOYED", "jobStatus": {"state": srv.final_state},
                                         **({"error": "ClassNotFoundException: com.example.Ysb"} if failed else {})}  # fmt: skip
                    else:
                        obj["status"] = {"lifecycleState": "DEPLOYED", "jobStatus": {"state": "CREATED"}}
                self._send(200, obj)

            def do_POST(self):
                body = self.read_json()
                errs = SCHEMA.errors(body) if self.path.split("?")[0] == PREFIX else ["wrong collection path"]
                if any(k in body["metadata"] for k in ("resourceVersion", "uid")):
                    errs.append("metadata carries server-owned fields")
                if errs:
                    srv.rejected.append(errs)
                    return self._send(422, {"kind": "Status", "code": 422, "message": "; ".join(errs)})
                name = body["metadata"]["name"]
                if name in srv.objects:
                    return self._send(409, {"kind": "Status", "code": 409, "reason": "AlreadyExists"})
                srv.created.append(json.loads(json.dumps(body)))
                srv.objects[name] = {**body, "metadata": {**body["metadata"], "resourceVersion": "1", "generation": 1}}
                self._send(201, srv.objects[name])

            def do_DELETE(self):
                name = self._name()
                srv.deleted.append(name)
                if srv.objects.pop(name, None) is None:
                    return self._send(404, {"kind": "Status", "code": 404, "reason": "NotFound"})
                self._send(200, {"kind": "Status", "status": "Success"})

        self._serve(Handler)


class FakeMetrics:
    """Raw-schema samples, one per second, for whichever job is asked: 2 source subtasks reading
    1500 + 2500 rec/s (4000 in all), a sink reading 3000, p95 latency 80 ms, 3.5 cores, 5000 MB heap."""

    def __init__(self):
        self.calls = []

    def fetch(self, job, start_ms, end_ms):
        self.calls.append((job, start_ms, end_ms))
        rows = []
        for ts in range(start_ms, end_ms, 1000):
            rows += [(job, "numRecordsInPerSecond", "source", 0, ts, 1500.0), (job, "numRecordsInPerSecond", "source", 1, ts, 2500.0),
                     (job, "numRecordsOutPerSecond", "source", 0, ts, 1400.0), (job, "numRecordsOutPerSecond", "source", 1, ts, 2400.0),
                     (job, "numRecordsInPerSecond", "sink", 0, ts, 3000.0), (job, "latencyP95Ms", "", -1, ts, 80.0),
                     (job, "cpuLoad", "", -1, ts, 3.5), (job, "heapUsedMb", "", -1, ts, 5000.0),
                     (job, "workloadRate", "", -1, ts, 4100.0)]  # fmt: skip
        return pd.DataFrame(rows, columns=list(RAW_COLUMNS))


def run(srv, metrics, clock, **kw):
    kw = {"rate": 4000.0, "warmup_s": 120, "measure_s": 60, "timeout_s": 300, "poll_s": 5, **kw}
    return run_profiling_deployment(
        srv.api(), "flink", "ysb", CONFIG, metrics_source=metrics, clock=clock, sleep=clock.advance, **kw
    )


def test_happy_path_creates_a_validated_copy_measures_and_deletes_it():
    clock, metrics = ManualClock(1_800_000_000), FakeMetrics()
    with FakeApiServer([production()]) as srv:
        df = run(srv, metrics, clock)
        (body,) = srv.created
        name = body["metadata"]["name"]
        assert name.startswith("ysb-profile-") and len(name) == len("ysb-profile-") + 8 and not srv.rejected
        assert body["metadata"]["labels"][PROFILE_LABEL] == "ysb" and "annotations" not in body["metadata"]
        spec = body["spec"]
        assert spec["image"] == "flink:1.20" and spec["job"]["jarURI"] == "local:///opt/job.jar"
        assert spec["job"]["args"] == ["--input-topic", "ads", "--output-topic", f"{name}-out", f"--group-id={name}"]
        assert (
            spec["job"]["parallelism"] == 8
            and spec["job"]["upgradeMode"] == "stateless"
            and "initialSavepointPath" not in spec["job"]
        )
        assert spec["taskManager"]["resource"] == {"cpu": 2.0, "memory": "2048m"}
        assert spec["flinkConfiguration"]["taskmanager.numberOfTaskSlots"] == "2"
        assert srv.deleted == [name] and set(srv.objects) == {"ysb"}  # production untouched
    assert list(df.columns) == list(PROFILING_COLUMNS) and len(df) == 1
    row = df.iloc[0]
    assert row["job"] == "ysb" and row["run_id"].startswith(name)
    # 2 GETs to start (5 s poll between them), then 120 s warm-up; the window is the next 60 s
    start_ms = (1_800_000_000 + 5 + 120) * 1000
    assert metrics.calls == [(name, start_ms, start_ms + 60_000)] and row["ts_ms"] == start_ms
    assert row["throughput"] == 4000.0 and row["latency_ms"] == 80.0 and row["input_rate"] == 4100.0
    assert row["cpu_used"] == 3.5 and row["memory_used_mb"] == 5000.0 and math.isnan(row["recovery_s"])
    assert (row["parallelism"], row["task_slots"], row["cpu"], row["memory_mb"], row["checkpoint_interval_s"]) == (
        8,
        2,
        2.0,
        2048,
        30,
    )


def test_source_vertex_throughput_is_its_records_out():
    clock = ManualClock(1_800_000_000)
    with FakeApiServer([production()]) as srv:
        df = run(srv, FakeMetrics(), clock, source_vertex="source")
    assert df.iloc[0]["throughput"] == 3800.0


def test_failed_job_raises_a_clear_error_and_is_deleted():
    clock = ManualClock(1_800_000_000)
    with FakeApiServer([production()], final_state="FAILED") as srv:
        with pytest.raises(ProfilingError) as e:
            run(srv, FakeMetrics(), clock)
        name = srv.created[0]["metadata"]["name"]
        assert f"flink/{name}" in str(e.value) and "FAILED" in str(e.value) and "ClassNotFoundException" in str(e.value)
        assert srv.deleted == [name] and name not in srv.objects


def test_never_running_times_out_names_the_last_state_and_is_deleted():
    clock = ManualClock(1_800_000_000)
    with FakeApiServer([production()], gets_to_start=10**6) as srv:
        with pytest.raises(ProfilingError, match=r"not RUNNING after 30 s \(lifecycle DEPLOYED, job CREATED"):
            run(srv, FakeMetrics(), clock, timeout_s=30)
        assert srv.deleted == [srv.created[0]["metadata"]["name"]]


def test_missing_metrics_fail_after_the_timeout_and_delete():
    class Empty(FakeMetrics):
        def fetch(self, job, start_ms, end_ms):
            return super().fetch(job, start_ms, end_ms).query("metric != 'latencyP95Ms'")

    clock = ManualClock(1_800_000_000)
    with FakeApiServer([production()]) as srv:
        with pytest.raises(ProfilingError, match=r"no samples for \['latency_ms'\]"):
            run(srv, Empty(), clock, timeout_s=20)
        assert len(srv.deleted) == 1


def test_over_budget_config_is_refused_before_anything_is_created():
    clock = ManualClock(0)
    with FakeApiServer([production()]) as srv:
        with pytest.raises(ProfilingError, match=r"would reserve 9 cores and 9216 MB .* over the budget of 8 cores"):
            run(srv, FakeMetrics(), clock, budget=ResourceBudget(cpu=8.0, memory_mb=100_000))
        assert srv.created == [] and srv.deleted == [] and clock.now() == 0


def test_job_without_output_override_is_refused():
    base = production()
    del base["metadata"]["annotations"]
    with pytest.raises(ProfilingError, match=OVERRIDES_ANNOTATION):
        profiling_deployment(base, CONFIG, schema=SCHEMA)
    base["metadata"]["annotations"] = {OVERRIDES_ANNOTATION: '{"sink": {}}'}
    with pytest.raises(ProfilingError, match=r"unexpected \['sink'\]"):
        profiling_deployment(base, CONFIG, schema=SCHEMA)
    base["metadata"]["annotations"] = {OVERRIDES_ANNOTATION: json.dumps({"flinkConfiguration": {"sink.topic": "{name}-out"}})}
    prof = profiling_deployment(base, CONFIG, schema=SCHEMA)
    assert prof.body["spec"]["flinkConfiguration"]["sink.topic"] == f"{prof.name}-out"
    assert prof.body["spec"]["job"]["args"][3] == "ads-out"  # args untouched when only the conf is overridden


def test_name_is_stable_per_config_and_differs_between_configs():
    a = profiling_deployment(production(), CONFIG, schema=SCHEMA).name
    assert a == profiling_deployment(production(), CONFIG, schema=SCHEMA).name
    assert a != profiling_deployment(production(), CONFIG.with_(parallelism=12), schema=SCHEMA).name
    assert np.isclose(profiling_deployment(production(), CONFIG, schema=SCHEMA).reserved_cpu, 1.0 + 4 * 2.0)


def test_invalid_copy_is_rejected_by_the_crd_before_creation():
    base = production()
    base["spec"]["flinkConfiguration"]["parallelism.default"] = 4  # Flink's configuration is strings only
    clock = ManualClock(0)
    with FakeApiServer([base]) as srv:
        with pytest.raises(ValueError, match=r"\$\.spec\.flinkConfiguration\.parallelism\.default: 4 is not a string"):
            run(srv, FakeMetrics(), clock)
        assert srv.created == [] and srv.deleted == []


def test_leftover_copy_of_an_earlier_run_makes_create_fail_and_is_cleaned_up():
    leftover = profiling_deployment(production(), CONFIG, schema=SCHEMA).body
    with FakeApiServer([production(), leftover]) as srv:
        with pytest.raises(ProfilingError, match=r"creating profiling FlinkDeployment .* failed \(HTTP 409\)"):
            run(srv, FakeMetrics(), ManualClock(0))
        assert srv.deleted == [leftover["metadata"]["name"]] and set(srv.objects) == {"ysb"}
