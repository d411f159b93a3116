"""A :class:`~flinktune.decision.stages.Realizer` for the local cluster, with measured downtime.

Use :class:`LocalFlinkRealizer` in the decision loop against a local cluster. Two paths:

- **in place** when only the parallelism (and so the number of TaskManagers of the same shape)
  changes: start the TaskManagers a scale-up needs, ask the adaptive scheduler for the new
  parallelism (``PUT /jobs/<jid>/resource-requirements`` plus a checkpoint so it acts now), then
  stop TaskManagers left without work after a scale-down;
- **savepoint redeploy** otherwise (slots, TaskManager memory or checkpoint interval change):
  stop with a savepoint, replace the TaskManagers when their shape changed, resubmit from the
  savepoint with the new parallelism and checkpoint interval.

Downtime is from the call that interrupts processing (the PUT, or the stop) until Flink's own
``subtasktimes`` say every subtask of the new deployment is RUNNING. ``cpu`` is nominal here: a
local TaskManager has no CPU limit, so the knob is carried but not enforced.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from flinktune.clock import Clock, SystemClock
from flinktune.config_space import Configuration
from flinktune.decision.reconfig import ReconfigMode, same_shape
from flinktune.decision.stages import RealizeResult
from flinktune.localflink.cluster import LocalFlinkCluster
from flinktune.localflink.jobcontrol import JobControl, JobControlError
from flinktune.localflink.rest import RestError

__all__ = ["LocalFlinkRealizer", "RealizeRecord"]


@dataclass(frozen=True)
class RealizeRecord:
    """One carried-out change: when, from what to what, how, and its downtime."""

    ts: float
    before: Configuration
    after: Configuration
    mode: ReconfigMode
    downtime_s: float


@dataclass
class LocalFlinkRealizer:
    """Applies configurations to the job of ``control`` on ``cluster``; ``config`` is the one in force."""

    cluster: LocalFlinkCluster
    control: JobControl
    config: Configuration
    clock: Clock = field(default_factory=SystemClock)
    timeout_s: float = 120.0
    history: list[RealizeRecord] = field(default_factory=list)

    def current(self, job: str) -> Configuration:
        return self.config

    def deploy(self) -> float:
        """Bring the cluster's TaskManagers to ``config`` and submit the job fresh; returns when it runs."""
        self._shape_taskmanagers(self.config, replace_all=False)
        jid = self.control.submit(self.config.parallelism, checkpoint_interval_s=self.config.checkpoint_interval_s)
        return self.control.wait_running(jid, parallelism=self.config.parallelism, timeout_s=self.timeout_s)

    def apply(self, job: str, config: Configuration) -> RealizeResult:
        if config == self.config:
            return RealizeResult(False, ReconfigMode.NOOP, 0.0, "already in force")
        before = self.config
        if same_shape(before, config):
            mode, downtime = ReconfigMode.IN_PLACE, self._in_place(config)
        else:
            mode, downtime = ReconfigMode.REDEPLOY, self._redeploy(config)
        self.config = config
        self.history.append(RealizeRecord(self.clock.now(), before, config, mode, downtime))
        return RealizeResult(True, mode, downtime, f"{before.describe()} -> {config.describe()}")

    # -- paths -------------------------------------------------------------------------------------
    def _in_place(self, config: Configuration) -> float:
        jid = self.control.require_job()
        self._shape_taskmanagers(config, replace_all=False, shrink=False)
        t0 = time.time()
        self.control.rescale_in_place(jid, config.parallelism)
        running = self.control.wait_running(jid, parallelism=config.parallelism, timeout_s=self.timeout_s, after=t0)
        self._shape_taskmanagers(config, replace_all=False, shrink=True)
        return max(0.0, running - t0)

    def _redeploy(self, config: Configuration) -> float:
        jid = self.control.require_job()
        t0 = time.time()
        savepoint = self.control.stop_with_savepoint(jid, f"file://{self.cluster.state_dir / 'savepoints'}")
        shape_changed = (self.config.task_slots, self.config.memory_mb) != (config.task_slots, config.memory_mb)
        self._shape_taskmanagers(config, replace_all=shape_changed)
        new = self.control.submit(config.parallelism, checkpoint_interval_s=config.checkpoint_interval_s, savepoint=savepoint)
        running = self.control.wait_running(new, parallelism=config.parallelism, timeout_s=self.timeout_s, after=t0)
        return max(0.0, running - t0)

    def _idle_taskmanagers(self) -> set[str]:
        idle = set()
        for tm in self.cluster.rest.get("/taskmanagers").get("taskmanagers", []):
            if int(tm.get("freeSlots", 0)) == int(tm.get("slotsNumber", -1)):
                idle.add(tm["id"])
        return idle

    def _shape_taskmanagers(self, config: Configuration, *, replace_all: bool, shrink: bool = True) -> None:
        """Run exactly ``config.taskmanagers`` TaskManagers of ``config``'s shape (stopping only idle ones)."""
        tms = self.cluster.taskmanagers()
        if replace_all:
            for tm in tms:
                self.cluster.stop_process(tm.pid)
            tms = []
        wrong = [t for t in tms if (t.slots, t.memory_mb) != (config.task_slots, config.memory_mb)]
        if wrong and not replace_all:
            raise JobControlError(
                f"TaskManagers {[t.pid for t in wrong]} do not have the shape of {config.describe()}; "
                "a shape change needs a savepoint redeploy"
            )
        for _ in range(config.taskmanagers - len(tms)):
            self.cluster.start_taskmanager(config.task_slots, config.memory_mb)
        extra = len(tms) - config.taskmanagers
        if extra > 0 and shrink:
            deadline = time.monotonic() + 30
            while extra > 0 and time.monotonic() < deadline:
                idle = self._idle_taskmanagers()
                for tm in [t for t in tms if t.resource_id in idle][:extra]:
                    self.cluster.stop_process(tm.pid)
                    extra -= 1
                time.sleep(0.5)
        want = config.taskmanagers * config.task_slots
        try:
            self.cluster.wait_for_slots(want, timeout_s=self.timeout_s)
        except RestError as exc:
            raise JobControlError(f"TaskManagers for {config.describe()} did not register: {exc}") from None
