"""Advice on Kubernetes: the realizer computes the patch and its diff, sends nothing, and the row says advice."""

from __future__ import annotations

from k8s_fake_server import FaultyDeploymentServer
from test_one_controller import JOB, TARGET, VIDS, AlwaysTarget, deployment

from flinktune.backends import Backend
from flinktune.clock import ManualClock
from flinktune.config_space import default_space
from flinktune.decision.loop import LoopSettings, build_decision_loop
from flinktune.decision.store import SqliteStateStore
from flinktune.decision.testing import FrameMetricsSource, raw_samples
from flinktune.kubernetes import KubernetesRealizer


def test_a_job_in_advice_on_kubernetes_gets_its_diff_recorded_and_nothing_sent(tmp_path):
    store = SqliteStateStore(tmp_path / "state.db")
    with FaultyDeploymentServer(deployment(None)) as srv:
        realizer = KubernetesRealizer(srv.api(retries=0), "flink", VIDS, poll_s=0.05, request_timeout_s=2.0, budget_s=3.0,
                                      dry_run=True)  # fmt: skip
        frame = raw_samples(JOB, 10_000 - 600, 600, rate=20000, p95=120)
        loop = build_decision_loop(Backend("kubernetes", FrameMetricsSource(frame), realizer, ManualClock(10_000.0)),
                                   LoopSettings(JOB, 250.0), policy=AlwaysTarget(), space=default_space(), store=store)  # fmt: skip
        outcome = loop.step()
        assert outcome.decision.target == TARGET and outcome.result is not None and not outcome.result.changed
        assert srv.patches == [] and "parallelism" in realizer.last_diff
    row = store.decisions(JOB).iloc[-1]
    assert (row["action"], row["status"], int(row["changed"]), int(row["dry_run"]), row["mode"]) == (
        "reconfigure",
        "recorded",
        0,
        1,
        "dry-run",
    )
