"""The Kubernetes realizer against a local API server that validates every request with the CRD."""

from __future__ import annotations

import pytest
from json_http import JsonHandler
from k8s_fake_server import LocalApiServer

from flinktune.clock import ManualClock
from flinktune.config_space import Configuration
from flinktune.decision.reconfig import ReconfigMode
from flinktune.kubernetes import (
    CRDValidationError,
    KubernetesRealizer,
    config_from_object,
    deployment_body,
    dry_run_diff,
    load_crd_schema,
    merge_patch,
    validate_object,
)  # fmt: skip
from flinktune.kubernetes.body import OVERRIDES_KEY, config_patch

VIDS = {"source": "aaa1", "lookup": "bbb2", "window": "ccc3", "sink": "ddd4"}
BASE = Configuration(24, 1, 1.0, 4096, 10)
SCHEMA = load_crd_schema()


class FakeApiServer(LocalApiServer):
    """GET/PATCH of one FlinkDeployment; validates each patched object against the CRD (422 if not)."""

    def __init__(self, obj, *, conflicts=0, stable_after=1, fail=False):
        self.obj, self.conflicts, self.stable_after, self.fail = obj, conflicts, stable_after, fail
        self.patches, self.rejected, self.gets_since_patch = [], [], 0
        srv = self

        class Handler(JsonHandler):
            def do_GET(self):
                srv.gets_since_patch += 1
                if srv.gets_since_patch > srv.stable_after and srv.patches:
                    state = "FAILED" if srv.fail and len(srv.patches) == 1 else "STABLE"
                    srv.obj["status"] = {
                        "lifecycleState": state,
                        "jobStatus": {"state": "RUNNING"},
                        "observedGeneration": srv.obj["metadata"]["generation"],
                    }
                self._send(200, srv.obj)

            def do_PATCH(self):
                body = self.read_json()
                if srv.conflicts > 0:
                    srv.conflicts -= 1
                    srv.obj["metadata"]["resourceVersion"] = str(int(srv.obj["metadata"]["resourceVersion"]) + 1)
                    return self._send(409, {"kind": "Status", "code": 409, "reason": "Conflict"})
                rv = body.get("metadata", {}).get("resourceVersion")
                if rv is not None and rv != srv.obj["metadata"]["resourceVersion"]:
                    return self._send(409, {"kind": "Status", "code": 409, "reason": "Conflict"})
                merged = merge_patch(srv.obj, body)
                errs = SCHEMA.errors(merged)
                if errs or "merge-patch" not in self.headers.get("Content-Type", ""):
                    srv.rejected.append((self.headers.get("Content-Type"), errs))
                    return self._send(422, {"kind": "Status", "code": 422, "message": "; ".join(errs)})
                srv.patches.append(body)
                merged["metadata"]["resourceVersion"] = str(int(srv.obj["metadata"]["resourceVersion"]) + 1)
                merged["metadata"]["generation"] = srv.obj["metadata"]["generation"] + 1
                merged["status"] = {"lifecycleState": "UPGRADING"}
                srv.obj, srv.gets_since_patch = merged, 0
                self._send(200, merged)

        self._serve(Handler)


def running(config=BASE, version="v1_20"):
    obj = deployment_body(
        "ysb", "flink", config, image="flink:1.20", jar_uri="local:///opt/job.jar", vertex_ids=VIDS, flink_version=version
    )
    obj["metadata"].update(resourceVersion="1", generation=1)
    obj["status"] = {"lifecycleState": "STABLE", "jobStatus": {"state": "RUNNING"}, "observedGeneration": 1}
    return obj


def realizer(server, **kw):
    return KubernetesRealizer(server.api(), "flink", VIDS, clock=ManualClock(0), sleep=lambda s: None, poll_s=1.0, **kw)


def test_body_validates_and_round_trips():
    obj = running(Configuration(16, 2, 2.0, 2048, 30, vertex_parallelism=(("sink", 4),)))
    validate_object(obj, SCHEMA)
    assert config_from_object(obj, VIDS) == Configuration(16, 2, 2.0, 2048, 30, vertex_parallelism=(("sink", 4),))


def test_invalid_body_names_path_and_rule():
    obj = running()
    obj["spec"]["job"]["upgradeMode"] = "yolo"
    obj["spec"]["flinkConfiguration"]["taskmanager.numberOfTaskSlots"] = 2
    with pytest.raises(CRDValidationError) as e:
        validate_object(obj, SCHEMA)
    assert "$.spec.job.upgradeMode" in str(e.value) and "enum" in str(e.value)
    assert "flinkConfiguration.taskmanager.numberOfTaskSlots" in str(e.value) and SCHEMA.source in str(e.value)


def test_parallelism_only_change_is_an_in_place_override_patch():
    with FakeApiServer(running()) as srv:
        res = realizer(srv).apply("ysb", BASE.with_(parallelism=12, vertex_parallelism={"sink": 2}))
        assert res.changed and res.mode is ReconfigMode.IN_PLACE
        (patch,) = srv.patches
        assert set(patch["spec"]) == {"flinkConfiguration"}  # spec.job.parallelism untouched: no redeploy
        assert patch["spec"]["flinkConfiguration"][OVERRIDES_KEY] == "aaa1:12,bbb2:12,ccc3:12,ddd4:2"
        assert srv.obj["spec"]["image"] == "flink:1.20"  # fields we do not own survive


def test_other_knobs_use_a_savepoint_upgrade_and_old_flink_never_rescales_in_place():
    with FakeApiServer(running()) as srv:
        res = realizer(srv).apply("ysb", Configuration(12, 2, 2.0, 2048, 30))
        assert res.mode is ReconfigMode.REDEPLOY and srv.obj["spec"]["taskManager"]["resource"] == {"cpu": 2.0, "memory": "2048m"}
        assert srv.obj["spec"]["job"]["upgradeMode"] == "savepoint" and srv.obj["spec"]["job"]["jarURI"] == "local:///opt/job.jar"
    _, mode = config_patch(running(version="v1_17"), BASE.with_(parallelism=12), VIDS)
    assert mode is ReconfigMode.REDEPLOY


def test_conflict_is_retried_on_a_fresh_read():
    with FakeApiServer(running(), conflicts=1) as srv:
        res = realizer(srv).apply("ysb", BASE.with_(parallelism=16))
        assert res.changed and len(srv.patches) == 1 and not srv.rejected
        assert srv.patches[0]["metadata"]["resourceVersion"] == "2"  # the re-read version, not the stale one


def test_failed_upgrade_is_rolled_back():
    with FakeApiServer(running(), fail=True) as srv:
        res = realizer(srv).apply("ysb", Configuration(8, 1, 1.0, 1024, 10))
        assert not res.changed and res.mode is ReconfigMode.ROLLED_BACK and "FAILED" in res.detail
        assert config_from_object(srv.obj, VIDS) == BASE and len(srv.patches) == 2


def test_dry_run_prints_a_diff_and_sends_nothing():
    with FakeApiServer(running()) as srv:
        res = realizer(srv, dry_run=True).apply("ysb", Configuration(8, 2, 2.0, 2048, 30))
        assert res.mode is ReconfigMode.DRY_RUN and not srv.patches
        assert "-      memory: 4096m" in res.detail and "+      memory: 2048m" in res.detail
    assert dry_run_diff(running(), {}) == ""


def test_kubernetes_realizer_keeps_the_realizer_contract():
    from stage_contracts import check_realizer

    with FakeApiServer(running()) as srv:
        check_realizer(realizer(srv), "ysb", BASE.with_(parallelism=16), Configuration(16, 2, 2.0, 2048, 30))
    with FakeApiServer(running(version="v1_17")) as srv:  # no adaptive scheduler: every change redeploys
        check_realizer(
            realizer(srv), "ysb", BASE.with_(parallelism=16), Configuration(16, 2, 2.0, 2048, 30), in_place_supported=False
        )


def test_a_job_that_never_becomes_stable_costs_at_most_the_apply_budget():
    # Unbounded, this would be 600 s of waiting, then 600 s more for the rollback, inside a 600 s decision interval.
    clock = ManualClock(0)
    with FakeApiServer(running(), stable_after=10**9) as srv:
        r = KubernetesRealizer(srv.api(), "flink", VIDS, clock=clock, sleep=clock.advance, poll_s=5.0, budget_s=480.0)
        res = r.apply("ysb", BASE.with_(parallelism=12))
        assert res.mode is ReconfigMode.ROLLED_BACK and not res.changed
        assert clock.now() <= 480.0 and res.downtime_s <= 480.0
        assert config_from_object(srv.obj, VIDS) == BASE and len(srv.patches) == 2


def test_make_realizer_bounds_calls_and_the_apply_from_settings():
    from flinktune.backends.cluster import make_realizer
    from flinktune.settings import Settings

    s = Settings(decision_interval_s=300, timeouts={"kubernetes_request_s": 3.0, "apply_budget_s": 900.0})
    r = make_realizer(
        "ysb",
        api=object(),
        environ={"FLINKTUNE_CLUSTER": "kubernetes", "FLINKTUNE_K8S_NAMESPACE": "flink"},
        timeouts=s.timeouts,
        budget_s=s.timeouts.apply_budget(s.decision_interval_s),
    )
    assert r.request_timeout_s == 3.0 and r.budget_s == 240.0 and r.stable_timeout_s == 120.0
