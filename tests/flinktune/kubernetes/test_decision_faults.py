"""Fault injection: the decision task against a local Kubernetes API server that fails each call.

Each case runs one decide step (a fresh loop rebuilt from the SQLite store, as each decide run is a
new process) while the stand-in fails a call (409, 403, 500, a timeout after the PATCH landed, a
hang, a PATCH that succeeds followed by failing reads, a job that never becomes stable), or kills
the task (a ``BaseException`` nothing catches) before each API call and each store write in turn.
Then a second run starts on a healthy server, 60 s later (inside the 300 s stabilization window).
After every case:

- the store and the cluster agree: the first run's row says ``applied`` exactly when the cluster
  runs its target, no row is left ``intended``, and what the store's last row says runs is what runs;
- no change bypasses the guard: the second run sends no PATCH;
- no run blocks longer than its budget (request timeouts and the apply budget, wall clock).
"""

from __future__ import annotations

import json
import time

import pytest
from k8s_fake_server import Fault, FaultyDeploymentServer

from flinktune.backends import Backend
from flinktune.clock import ManualClock
from flinktune.config_space import Configuration, default_space
from flinktune.decision import Action, Decision
from flinktune.decision.loop import LoopSettings, build_decision_loop
from flinktune.decision.stages import DecisionOutcome, DecisionRecord
from flinktune.decision.store import SqliteStateStore
from flinktune.decision.testing import FrameMetricsSource, raw_samples
from flinktune.kubernetes import KubernetesRealizer, config_from_object, deployment_body

pytestmark = pytest.mark.faults

VIDS = {"source": "aaa1", "sink": "bbb2"}
SPACE = default_space()
BASE = Configuration(24, 1, 1.0, 4096, 10)
TARGET = Configuration(16, 1, 1.0, 4096, 10)  # parallelism only: an in-place rescale
REQUEST_S, RETRIES, BUDGET_S = 0.3, 1, 1.5
#: One run's wall-clock bound: the apply budget, plus the reads around it at their worst
#: (each read: (retries + 1) request timeouts), plus the rollback PATCH and scheduling slack.
RUN_BOUND_S = BUDGET_S + 4 * (RETRIES + 1) * REQUEST_S + 1.0
JOB = "ysb"


class Killed(BaseException):
    """The task dying at this point (nothing in the loop may catch it)."""


class AlwaysTarget:
    """A policy that always proposes the same change (so any second change would be the guard's failure)."""

    name = "always-target"

    def decide(self, state, context):
        if state.config == TARGET:
            return Decision.keep(self.name, "already at the target")
        return Decision(Action.RECONFIGURE, "test: move to the target", self.name, target=TARGET)


class KillAt:
    """Wraps an object; raises :class:`Killed` when the ``at``-th call (counted over ``counter``) of a listed method starts."""

    def __init__(self, inner, methods, counter, at):
        self.inner, self.methods, self.counter, self.at = inner, methods, counter, at

    def __getattr__(self, name):
        attr = getattr(self.inner, name)
        if name not in self.methods:
            return attr

        def call(*a, **kw):
            self.counter[0] += 1
            if self.counter[0] == self.at:
                raise Killed(f"killed before {name}")
            return attr(*a, **kw)

        return call


def running(config=BASE):
    obj = deployment_body(JOB, "flink", config, image="flink:1.20", jar_uri="local:///opt/job.jar", vertex_ids=VIDS)
    obj["metadata"].update(resourceVersion="1", generation=1)
    obj["status"] = {"lifecycleState": "STABLE", "jobStatus": {"state": "RUNNING"}, "observedGeneration": 1}
    return obj


def decide_once(srv, store_path, now, *, kill_at=None):
    """One decide run: a fresh realizer and loop from the store, one step (wall time returned)."""
    counter = [0]
    api = srv.api(retries=RETRIES)
    store = SqliteStateStore(store_path)
    if kill_at is not None:
        api = KillAt(api, {"get_namespaced_custom_object", "patch_namespaced_custom_object"}, counter, kill_at)
        store = KillAt(store, {"record_decision", "update_decision"}, counter, kill_at)
    realizer = KubernetesRealizer(api, "flink", VIDS, poll_s=0.05, request_timeout_s=REQUEST_S, budget_s=BUDGET_S,
                                  stable_timeout_s=BUDGET_S / 2)  # fmt: skip
    frame = raw_samples(JOB, int(now) - 600, 600, rate=20000, p95=120)
    loop = build_decision_loop(Backend("kubernetes", FrameMetricsSource(frame), realizer, ManualClock(now)),
                               LoopSettings(JOB, 250.0), policy=AlwaysTarget(), space=SPACE, store=store)  # fmt: skip
    t0 = time.monotonic()
    try:
        loop.step()
    except Killed:
        pass
    return time.monotonic() - t0, counter[0]


def seed(store_path):
    """A settled earlier decision (a keep on BASE), as a job that has run before has."""
    SqliteStateStore(store_path).record_decision(
        DecisionRecord(JOB, 0.0, _state(BASE), Decision.keep("seed", "earlier run"), None)
    )


def _state(config):
    from flinktune.decision.evaluation import evaluate

    return evaluate(JOB, raw_samples(JOB, -600, 600, rate=20000, p95=120), config, 0.0, window_s=600)


def assert_agree_and_guarded(srv, store_path, first_id_after):
    """Run two: healthy server, 60 s later. Then the invariants of the module docstring (run two may
    change the job only when run one neither wrote an intent nor sent a PATCH: then nothing happened)."""
    before = SqliteStateStore(store_path).decisions(JOB)
    attempted = bool(srv.patches) or bool((before[before["id"] > first_id_after]["action"] == "reconfigure").any())
    patches_before = len(srv.patches)
    srv.faults = {"GET": [], "PATCH": []}
    srv.always = {"GET": None, "PATCH": None}
    srv.stable_after = 1
    wall, _ = decide_once(srv, store_path, 1060.0)
    assert wall < RUN_BOUND_S
    assert not attempted or len(srv.patches) == patches_before, (
        f"run two changed the job inside the stabilization window: {srv.patches[patches_before:]}"
    )
    rows = SqliteStateStore(store_path).decisions(JOB)
    assert "intended" not in set(rows["status"]), rows[["id", "status", "error"]].to_string()
    running_now = config_from_object(srv.obj, VIDS)
    first = rows[rows["id"] > first_id_after]
    changes = first[first["action"] == "reconfigure"]
    for r in changes.itertuples():
        landed = running_now == Configuration.from_dict(json.loads(r.target))
        assert (r.status == "applied") == landed, (
            f"row {r.id} says {r.status} ({r.error}) but the cluster runs {running_now.describe()}"
        )
        if r.status != "applied":
            assert r.error, f"row {r.id}: a failed change must carry its error"
    last = rows.iloc[-1]  # what the store's last row says runs now
    said = json.loads(last["target"]) if last["status"] in ("applied", "reconciled") else json.loads(last["state"])["config"]
    assert Configuration.from_dict(said) == running_now
    return rows


CASES = {
    "patch-409": ({"always": {"PATCH": Fault("status", 409)}}, "failed", False),
    "patch-403": ({"always": {"PATCH": Fault("status", 403)}}, "failed", False),
    "patch-500": ({"always": {"PATCH": Fault("status", 500)}}, "failed", False),
    "patch-timeout-landed": ({"faults": {"PATCH": [Fault("delay", delay_s=2 * REQUEST_S)]}}, "failed", True),
    "patch-hang": ({"always": {"PATCH": Fault("hang")}}, "failed", False),
    "patch-ok-then-get-500": ({"after_patch_get": Fault("status", 500)}, "failed", True),
    "never-stable": ({"stable_after": None}, "rolled-back", False),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_failing_call_leaves_a_row_and_the_next_run_holds(tmp_path, case):
    setup, status, lands = CASES[case]
    db = tmp_path / "state.db"
    seed(db)
    with FaultyDeploymentServer(running(), stable_after=setup.get("stable_after", 1)) as srv:
        for verb, fault in setup.get("always", {}).items():
            srv.always[verb] = fault
        for verb, faults in setup.get("faults", {}).items():
            srv.faults[verb] = list(faults)
        if "after_patch_get" in setup:  # the PATCH succeeded, the reads after it failed
            srv.faults["GET"] = [None, None, None]  # the step's read, the apply's read, the read before the PATCH
            srv.always["GET"] = None
            orig = srv.patches

            class Trip(list):
                def append(self, item):
                    super().append(item)
                    srv.always["GET"] = setup["after_patch_get"]

            srv.patches = Trip(orig)
        wall, _ = decide_once(srv, db, 1000.0)
        assert wall < RUN_BOUND_S, f"{case}: run one blocked {wall:.1f} s (bound {RUN_BOUND_S:.1f} s)"
        rows = SqliteStateStore(db).decisions(JOB)
        (row,) = rows[rows["action"] == "reconfigure"].itertuples()
        assert row.status == status and row.error, f"{case}: {row.status} {row.error}"
        assert (config_from_object(srv.obj, VIDS) == TARGET) == lands
        rows = assert_agree_and_guarded(srv, db, first_id_after=1)
        if lands:  # reconciliation found the change had landed and settled the row
            assert "reconciled" in rows[rows["action"] == "reconfigure"].iloc[0]["error"]


def test_an_unreadable_cluster_is_a_hold_with_a_row_within_the_request_budget(tmp_path):
    db = tmp_path / "state.db"
    seed(db)
    for fault in (Fault("status", 500), Fault("status", 403), Fault("hang")):
        with FaultyDeploymentServer(running()) as srv:
            srv.always["GET"] = fault
            wall, _ = decide_once(srv, db, 1000.0)
            assert wall < (RETRIES + 1) * REQUEST_S + 1.0
            last = SqliteStateStore(db).decisions(JOB).iloc[-1]
            assert last["action"] == "keep" and "cannot read the job's configuration" in last["reason"] and not srv.patches


def test_a_kill_at_every_step_never_lets_the_next_run_bypass_the_guard(tmp_path):
    with FaultyDeploymentServer(running()) as srv:  # how many kill points a clean run has
        _, clean_calls = decide_once(srv, tmp_path / "clean.db", 1000.0, kill_at=10**6)
    assert clean_calls >= 6  # reads, the intent, the PATCH, the wait's reads, the settled row
    guarded = 0
    for at in range(1, clean_calls + 1):
        db = tmp_path / f"kill{at}.db"
        seed(db)
        with FaultyDeploymentServer(running()) as srv:
            decide_once(srv, db, 1000.0, kill_at=at)
            patches = len(srv.patches)
            assert_agree_and_guarded(srv, db, first_id_after=1)
            guarded += len(srv.patches) == patches
    assert guarded >= clean_calls - 2  # only kills before the intent was written leave run two free to act


def test_the_store_refuses_an_unknown_status_and_an_unknown_row(tmp_path):
    store = SqliteStateStore(tmp_path / "s.db")
    with pytest.raises(ValueError, match="decision status 'maybe'"):
        store.record_decision(DecisionRecord(JOB, 0.0, _state(BASE), Decision.keep("t", "x"), None, status="maybe"))
    with pytest.raises(KeyError, match="no decision with id 7"):
        store.update_decision(7, DecisionOutcome(None, "failed"))


def test_a_change_made_outside_the_tuner_is_recorded_and_counted_as_a_change(tmp_path):
    db = tmp_path / "state.db"
    seed(db)  # the store last saw BASE
    other = BASE.with_(parallelism=20)
    with FaultyDeploymentServer(running(other)) as srv:  # someone else rescaled the job in between
        decide_once(srv, db, 1000.0)
        rows = SqliteStateStore(db).decisions(JOB)
        rec = rows[rows["status"] == "reconciled"]
        assert len(rec) == 1 and "the cluster runs" in rec.iloc[0]["reason"] and other.describe() in rec.iloc[0]["reason"]
        assert not srv.patches and rows.iloc[-1]["reason"].startswith("stabilizing")  # it restarted the job: wait first
