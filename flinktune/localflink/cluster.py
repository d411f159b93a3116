"""A standalone Flink session cluster on 127.0.0.1: start, stop and inspect it, by PID.

Use :class:`LocalFlinkCluster` with a state directory (default ``var/localflink/cluster``): it
writes its own ``conf/config.yaml`` (small memory for 2 cores, adaptive scheduler, REST caches
refreshed every 0.5-1 s, fast heartbeats), starts the JobManager and each TaskManager as a
foreground JVM it owns (``*.sh start-foreground`` execs java, so the child's PID is the JVM's),
and records every PID in ``state.json``. Stopping kills exactly those PIDs after checking that
each still runs with this cluster's conf dir (a recycled PID is never killed). The Prometheus
reporter stays off: it listens on all interfaces.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from flinktune.clock import Clock, SystemClock
from flinktune.lake.atomic import atomic_write
from flinktune.localflink.distribution import FlinkDistribution, find_distribution
from flinktune.localflink.rest import FlinkRest, RestError

__all__ = ["ClusterError", "ClusterSpec", "LocalFlinkCluster", "PortTakenError", "TaskManagerProc", "free_port", "pid_alive"]


class ClusterError(RuntimeError):
    """The cluster could not start, stop or answer; the message names the process, port or file."""


class PortTakenError(ClusterError):
    """A port the cluster needs is already bound on 127.0.0.1."""


def free_port() -> int:
    """A port that is free on 127.0.0.1 right now (for tests and side-by-side clusters)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _port_taken(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return True
    return False


@dataclass(frozen=True)
class ClusterSpec:
    """Ports and sizes of the local cluster (memory in MB; ``jm_memory_mb`` is the JobManager process)."""

    rest_port: int = 8081
    rpc_port: int = 6123
    jm_memory_mb: int = 1024
    taskmanagers: int = 1
    tm_slots: int = 1
    tm_memory_mb: int = 1024
    checkpoint_interval_s: int = 10
    rescale_cooldown_s: int = 5
    extra: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class TaskManagerProc:
    """One TaskManager JVM this cluster started."""

    pid: int
    slots: int
    memory_mb: int
    started: float
    log: str
    resource_id: str = ""


def pid_alive(pid: int) -> bool:
    """Whether process ``pid`` runs (a zombie does not; one we may not signal does)."""
    try:
        os.waitpid(pid, os.WNOHANG)  # reap our own exited children so they do not look alive
    except ChildProcessError:
        pass
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        return stat.rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return True


class LocalFlinkCluster:
    """One session cluster rooted at ``state_dir`` (conf, logs, checkpoints, savepoints, state.json)."""

    def __init__(
        self,
        state_dir: str | Path,
        spec: ClusterSpec | None = None,
        *,
        dist: FlinkDistribution | None = None,
        clock: Clock | None = None,
    ) -> None:
        self.state_dir = Path(state_dir).resolve()
        self.spec = spec or ClusterSpec()
        self._dist = dist
        self.clock = clock or SystemClock()
        self.conf_dir = self.state_dir / "conf"
        self.log_dir = self.state_dir / "log"
        self.state_file = self.state_dir / "state.json"

    # -- files -------------------------------------------------------------------------------
    @property
    def dist(self) -> FlinkDistribution:
        if self._dist is None:
            self._dist = find_distribution()
        return self._dist

    def _state(self) -> dict[str, Any]:
        if not self.state_file.exists():
            return {}
        try:
            return json.loads(self.state_file.read_text())
        except ValueError as exc:
            raise ClusterError(
                f"{self.state_file}: unreadable cluster state ({exc}); stop the PIDs by hand and delete it"
            ) from None

    def _save(self, state: dict[str, Any]) -> None:
        atomic_write(self.state_file, (json.dumps(state, indent=2)).encode())

    @property
    def rest(self) -> FlinkRest:
        port = self._state().get("rest_port", self.spec.rest_port)
        return FlinkRest(int(port))

    def _config_yaml(self) -> str:
        shipped = (self.dist.home / "conf" / "config.yaml").read_text()
        java_opts = ""
        lines = shipped.splitlines()
        for i, line in enumerate(lines):  # the --add-opens list the JVMs need, copied verbatim
            if line.strip().startswith("all:") and i >= 2 and "opts" in lines[i - 1]:
                java_opts = line.split("all:", 1)[1].strip()
        s = self.spec
        d = self.state_dir
        conf = {
            "env.java.opts.all": java_opts,
            "jobmanager.bind-host": "127.0.0.1",
            "jobmanager.rpc.address": "127.0.0.1",
            "jobmanager.rpc.port": str(s.rpc_port),
            "jobmanager.memory.process.size": f"{s.jm_memory_mb}m",
            "jobmanager.execution.failover-strategy": "region",
            "jobmanager.scheduler": "adaptive",  # needed for in-place rescaling (resource requirements)
            "jobmanager.adaptive-scheduler.executing.cooldown-after-rescaling": f"{s.rescale_cooldown_s}s",
            "taskmanager.bind-host": "127.0.0.1",
            "taskmanager.host": "127.0.0.1",
            "taskmanager.numberOfTaskSlots": str(s.tm_slots),
            "taskmanager.memory.process.size": f"{s.tm_memory_mb}m",
            "parallelism.default": "1",
            "rest.address": "127.0.0.1",
            "rest.bind-address": "127.0.0.1",
            "rest.port": str(s.rest_port),
            "blob.server.port": "0",
            "state.backend.type": "hashmap",
            "execution.checkpointing.dir": f"file://{d / 'checkpoints'}",
            "execution.checkpointing.savepoint-dir": f"file://{d / 'savepoints'}",
            "execution.checkpointing.interval": f"{s.checkpoint_interval_s}s",
            "restart-strategy.type": "fixed-delay",
            "restart-strategy.fixed-delay.attempts": "1000",
            "restart-strategy.fixed-delay.delay": "2s",
            "metrics.fetcher.update-interval": "1000",  # REST metrics are a cache; refresh it every second
            "web.refresh-interval": "500",  # job-status cache: 3 s by default distorts measured downtimes
            # The REST metric fetcher asks every TaskManager with this timeout and starts no new fetch
            # until all answered: after a TaskManager kill its default (10 min) froze every metric for
            # minutes (docs/results/local-flink.md). Job submission and savepoints take well under 30 s here.
            "web.timeout": "30000",
            "web.upload.dir": str(d / "web-upload"),
            "heartbeat.interval": "2000",  # detect a lost TaskManager in seconds, not ~17 s
            "heartbeat.timeout": "10000",
            "io.tmp.dirs": str(d / "tmp"),
        }
        conf.update(s.extra)
        return "".join(f"{k}: {json.dumps(v) if k == 'env.java.opts.all' else v}\n" for k, v in conf.items())

    def _prepare(self) -> None:
        for sub in ("conf", "log", "checkpoints", "savepoints", "web-upload", "tmp", "pids"):
            (self.state_dir / sub).mkdir(parents=True, exist_ok=True)
        for f in (self.dist.home / "conf").iterdir():
            if f.name.startswith(("log4j", "logback")):
                shutil.copy(f, self.conf_dir / f.name)
        atomic_write(self.conf_dir / "config.yaml", (self._config_yaml()).encode())
        atomic_write(self.conf_dir / "masters", (f"127.0.0.1:{self.spec.rest_port}\n").encode())
        atomic_write(self.conf_dir / "workers", (b"127.0.0.1\n"))

    def _env(self) -> dict[str, str]:
        env = dict(os.environ)
        env.update(
            FLINK_HOME=str(self.dist.home),
            FLINK_CONF_DIR=str(self.conf_dir),
            FLINK_LOG_DIR=str(self.log_dir),
            FLINK_PID_DIR=str(self.state_dir / "pids"),
            JAVA_HOME=str(self.dist.java.resolve().parents[1]),
        )
        env.pop("FLINK_ENV_JAVA_OPTS", None)
        return env

    def _spawn(self, script: str, args: list[str], log_name: str) -> tuple[int, str]:
        log = self.log_dir / log_name
        with open(log, "ab") as out:
            proc = subprocess.Popen(
                [str(self.dist.bin / script), "start-foreground", *args],
                env=self._env(),
                cwd=self.state_dir,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        return proc.pid, str(log)

    def _ours(self, pid: int) -> bool:
        """True when ``pid`` is alive and runs with this cluster's conf dir (guards against recycled PIDs)."""
        if not pid_alive(pid):
            return False
        try:
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
        except OSError:
            return False
        return str(self.conf_dir) in cmd

    # -- lifecycle ---------------------------------------------------------------------------
    def up(self, timeout_s: float = 90.0) -> dict[str, Any]:
        """Start the JobManager and ``spec.taskmanagers`` TaskManagers; wait until all slots are registered."""
        state = self._state()
        if state.get("jobmanager") and self._ours(int(state["jobmanager"]["pid"])):
            raise ClusterError(
                f"a cluster already runs from {self.state_dir} (JobManager PID {state['jobmanager']['pid']}); "
                "stop it first (flinktune local-flink down)"
            )
        for key, port in (("rest.port", self.spec.rest_port), ("jobmanager.rpc.port", self.spec.rpc_port)):
            if _port_taken(port):
                raise PortTakenError(f"port {port} ({key}) is already in use on 127.0.0.1; choose another port")
        self._prepare()
        start = self.clock.now()
        pid, log = self._spawn("jobmanager.sh", [], "jobmanager.out")
        self._save(
            {
                "rest_port": self.spec.rest_port,
                "rpc_port": self.spec.rpc_port,
                "started": start,
                "jobmanager": {"pid": pid, "log": log},
                "taskmanagers": [],
            }
        )
        try:
            for _ in range(self.spec.taskmanagers):
                self.start_taskmanager()
            self.wait_for_slots(self.spec.taskmanagers * self.spec.tm_slots, timeout_s=timeout_s)
        except Exception:
            self.down()
            raise
        return self.status()

    def start_taskmanager(self, slots: int | None = None, memory_mb: int | None = None) -> TaskManagerProc:
        """Start one more TaskManager (with its own slot count and process memory); returns its PID record."""
        slots = slots or self.spec.tm_slots
        memory_mb = memory_mb or self.spec.tm_memory_mb
        state = self._state()
        if not state.get("jobmanager"):
            raise ClusterError(f"no cluster runs from {self.state_dir}: start it first (flinktune local-flink up)")
        n = int(state.get("tm_counter", 0))
        state["tm_counter"] = n + 1
        rid = f"tm-{n}"  # our own resource id: /taskmanagers/<rid> then maps to this PID
        pid, log = self._spawn(
            "taskmanager.sh",
            [
                "-D",
                f"taskmanager.numberOfTaskSlots={slots}",
                "-D",
                f"taskmanager.memory.process.size={memory_mb}m",
                "-D",
                f"taskmanager.resource-id={rid}",
            ],
            f"taskmanager-{n}.out",
        )
        tm = TaskManagerProc(pid=pid, slots=slots, memory_mb=memory_mb, started=self.clock.now(), log=log, resource_id=rid)
        state["taskmanagers"].append(asdict(tm))
        self._save(state)
        return tm

    def taskmanagers(self) -> list[TaskManagerProc]:
        """TaskManagers started here that are still alive (dead entries are pruned from state.json)."""
        state = self._state()
        live = [t for t in state.get("taskmanagers", []) if self._ours(int(t["pid"]))]
        if state and len(live) != len(state.get("taskmanagers", [])):
            state["taskmanagers"] = live
            self._save(state)
        return [TaskManagerProc(**t) for t in live]

    def stop_process(self, pid: int, *, kill: bool = False, timeout_s: float = 30.0) -> None:
        """SIGTERM (or SIGKILL with ``kill``) one PID of this cluster and wait until it is gone."""
        if not self._ours(pid):
            return
        os.kill(pid, signal.SIGKILL if kill else signal.SIGTERM)
        deadline = time.monotonic() + timeout_s
        while pid_alive(pid):
            if time.monotonic() > deadline:
                os.kill(pid, signal.SIGKILL)
                deadline = time.monotonic() + 10
            time.sleep(0.1)

    def wait_for_slots(self, slots: int, timeout_s: float = 60.0) -> dict[str, Any]:
        """Poll ``/overview`` until ``slots`` slots are registered; raise naming the JobManager log otherwise."""
        deadline = time.monotonic() + timeout_s
        last: Any = None
        while time.monotonic() < deadline:
            jm = self._state().get("jobmanager")
            if jm and not pid_alive(int(jm["pid"])):
                raise ClusterError(f"the JobManager (PID {jm['pid']}) exited during start; see {jm['log']}")
            try:
                last = self.rest.get("/overview")
                if int(last.get("slots-total", 0)) >= slots:
                    return last
            except RestError as exc:
                last = str(exc)
            time.sleep(0.5)
        raise ClusterError(
            f"the cluster did not offer {slots} slots within {timeout_s:.0f} s (last answer: {last}); "
            f"see the logs in {self.log_dir}"
        )

    def down(self, timeout_s: float = 30.0) -> list[int]:
        """Stop every TaskManager, then the JobManager, by PID; returns the PIDs that were stopped."""
        state = self._state()
        stopped = []
        for t in state.get("taskmanagers", []):
            if self._ours(int(t["pid"])):
                self.stop_process(int(t["pid"]), timeout_s=timeout_s)
                stopped.append(int(t["pid"]))
        jm = state.get("jobmanager")
        if jm and self._ours(int(jm["pid"])):
            self.stop_process(int(jm["pid"]), timeout_s=timeout_s)
            stopped.append(int(jm["pid"]))
        if self.state_file.exists():
            self.state_file.unlink()
        return stopped

    def status(self) -> dict[str, Any]:
        """PIDs and liveness of every process, plus Flink's ``/overview`` when the REST API answers."""
        state = self._state()
        jm = state.get("jobmanager")
        out: dict[str, Any] = {
            "state_dir": str(self.state_dir),
            "running": jm is not None and self._ours(int(jm["pid"])),
            "rest": f"http://127.0.0.1:{state.get('rest_port', self.spec.rest_port)}",
            "jobmanager_pid": jm["pid"] if jm else None,
            "taskmanager_pids": [t.pid for t in self.taskmanagers()] if jm else [],
            "overview": None,
        }
        if out["running"]:
            try:
                out["overview"] = self.rest.get("/overview")
            except RestError as exc:
                out["overview"] = {"error": str(exc)}
        return out
