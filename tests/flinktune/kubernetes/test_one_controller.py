"""One controller per job: a FlinkDeployment with the operator's autoscaler on is held, never patched.

Against the local Kubernetes API server stand-in (real HTTP through the kubernetes client): the
decision is recorded as a hold naming the key, no PATCH is sent, and once the user turns the
autoscaler off the next decision changes the job.
"""

from __future__ import annotations

import pytest
from k8s_fake_server import FaultyDeploymentServer

from flinktune.backends import Backend
from flinktune.clock import ManualClock
from flinktune.config_space import Configuration, default_space
from flinktune.decision import Action, Decision
from flinktune.decision.loop import LoopSettings, build_decision_loop
from flinktune.decision.store import SqliteStateStore
from flinktune.decision.testing import FrameMetricsSource, raw_samples
from flinktune.kubernetes import KubernetesRealizer, deployment_body
from flinktune.kubernetes.controllers import other_controller
from flinktune.kubernetes.realizer import RealizeError

VIDS = {"source": "aaa1", "sink": "bbb2"}
BASE = Configuration(24, 1, 1.0, 4096, 10)
TARGET = Configuration(16, 1, 1.0, 4096, 10)
JOB = "ysb"


class AlwaysTarget:
    name = "always-target"

    def decide(self, state, context):
        if state.config == TARGET:
            return Decision.keep(self.name, "already at the target")
        return Decision(Action.RECONFIGURE, "test: move to the target", self.name, target=TARGET)


def deployment(autoscaler: str | None):
    obj = deployment_body(JOB, "flink", BASE, image="flink:1.20", jar_uri="local:///opt/job.jar", vertex_ids=VIDS)
    if autoscaler is not None:
        obj["spec"]["flinkConfiguration"]["job.autoscaler.enabled"] = autoscaler
    obj["metadata"].update(resourceVersion="1", generation=1)
    obj["status"] = {"lifecycleState": "STABLE", "jobStatus": {"state": "RUNNING"}, "observedGeneration": 1}
    return obj


def step(srv, store, now):
    realizer = KubernetesRealizer(srv.api(retries=0), "flink", VIDS, poll_s=0.05, request_timeout_s=2.0, budget_s=3.0,
                                  stable_timeout_s=1.5)  # fmt: skip
    frame = raw_samples(JOB, int(now) - 600, 600, rate=20000, p95=120)
    loop = build_decision_loop(Backend("kubernetes", FrameMetricsSource(frame), realizer, ManualClock(now)),
                               LoopSettings(JOB, 250.0), policy=AlwaysTarget(), space=default_space(), store=store)  # fmt: skip
    return loop.step()


def test_a_deployment_with_the_operator_autoscaler_on_is_held_until_it_is_turned_off(tmp_path):
    store = SqliteStateStore(tmp_path / "state.db")
    with FaultyDeploymentServer(deployment("true")) as srv:
        held = step(srv, store, 10_000.0)
        assert held.decision.action is Action.KEEP and held.result is None
        reason = held.decision.reason
        assert reason.startswith(
            "hold: FlinkDeployment flink/ysb has the operator's autoscaler on (job.autoscaler.enabled: true)"
        )
        assert "\n" not in reason and "turned off" in reason
        assert srv.patches == [] and ("PATCH", "200") not in srv.calls
        row = store.decisions(JOB).iloc[-1]
        assert row["reason"] == reason and row["status"] == "recorded" and int(row["changed"]) == 0
        srv.obj["spec"]["flinkConfiguration"]["job.autoscaler.enabled"] = "false"  # the user turns the operator's off
        moved = step(srv, store, 10_300.0)
        assert moved.decision.action is Action.RECONFIGURE and moved.result is not None and moved.result.changed
        assert len(srv.patches) == 1


def test_the_realizer_never_patches_a_job_whose_autoscaler_came_on_after_the_read(tmp_path):
    with FaultyDeploymentServer(deployment(None)) as srv:
        realizer = KubernetesRealizer(srv.api(retries=0), "flink", VIDS, poll_s=0.05, request_timeout_s=2.0, budget_s=3.0)
        assert realizer.current(JOB) == BASE and realizer.held is None
        srv.obj["spec"]["flinkConfiguration"]["kubernetes.operator.job.autoscaler.enabled"] = "True"
        with pytest.raises(RealizeError, match="operator's autoscaler on"):
            realizer.apply(JOB, TARGET)
        assert srv.patches == []


@pytest.mark.parametrize("value,held", [("true", True), ("TRUE ", True), ("false", False), (None, False)])
def test_other_controller_reads_the_switch(value, held):
    assert (other_controller(deployment(value)) is not None) is held
