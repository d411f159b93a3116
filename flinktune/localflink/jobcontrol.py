"""Submit, find, stop and rescale one job on the local cluster through REST.

Use :class:`JobControl` from the realizer, the failure injector and the profiling sweep. It knows
the exact calls that work on Flink 2.3: jar upload + run with
``savepointPath`` and per-job ``flinkConfiguration``; stop-with-savepoint; in-place rescale
through the adaptive scheduler's resource requirements followed by a checkpoint (without it the
rescale waits for the next periodic checkpoint). Times of state changes come from Flink's own
``subtasktimes`` (the REST job-status cache would add seconds).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from flinktune.localflink.rest import FlinkRest, RestError

__all__ = ["BENCH_ENTRY_CLASS", "JobControl", "JobControlError", "JobSpec"]

BENCH_ENTRY_CLASS = "flinktune.bench.WindowBench"
_ENDED = {"FINISHED", "CANCELED", "FAILED", "SUSPENDED"}


class JobControlError(RuntimeError):
    """A job could not be submitted, found, stopped or rescaled; the message names the job and the call."""


@dataclass(frozen=True)
class JobSpec:
    """The benchmark job to run: jar, entry class, name, rate file and cost knobs."""

    jar: Path
    name: str = "flinktune-bench"
    rate_file: Path | None = None
    initial_rate: float = 1000.0
    keys: int = 1000
    work: int = 20000
    wait_us: int = 0  # a wait per record (an external call's latency): capacity bounded without spending CPU
    window_ms: int = 2000
    entry_class: str = BENCH_ENTRY_CLASS
    extra_args: tuple[str, ...] = field(default=())

    def program_args(self) -> list[str]:
        args = [
            "--name",
            self.name,
            "--rate",
            f"{self.initial_rate:g}",
            "--keys",
            str(self.keys),
            "--work",
            str(self.work),
            "--window-ms",
            str(self.window_ms),
        ]
        if self.wait_us > 0:
            args += ["--wait-us", str(self.wait_us)]
        if self.rate_file is not None:
            args += ["--rate-file", str(Path(self.rate_file).resolve())]
        return args + list(self.extra_args)


class JobControl:
    """Operations on the job named ``spec.name`` of one cluster."""

    def __init__(self, rest: FlinkRest, spec: JobSpec) -> None:
        self.rest = rest
        self.spec = spec
        self._jar_id: str | None = None

    # -- finding ---------------------------------------------------------------------------------
    def job_id(self, *, running_only: bool = True) -> str | None:
        """The id of the newest job with this name (not ended, unless ``running_only`` is False)."""
        jobs = self.rest.get("/jobs/overview").get("jobs", [])
        mine = [j for j in jobs if j.get("name") == self.spec.name and (not running_only or j.get("state") not in _ENDED)]
        if not mine:
            return None
        return max(mine, key=lambda j: j.get("start-time", 0))["jid"]

    def require_job(self) -> str:
        jid = self.job_id()
        if jid is None:
            raise JobControlError(f"job {self.spec.name!r} is not running on {self.rest.base}")
        return jid

    def details(self, jid: str) -> dict[str, Any]:
        return self.rest.get(f"/jobs/{jid}")

    def vertices(self, jid: str) -> list[dict[str, Any]]:
        return self.details(jid).get("vertices", [])

    # -- submit and wait ---------------------------------------------------------------------------
    def jar_id(self) -> str:
        if self._jar_id is None:
            if not Path(self.spec.jar).exists():
                raise JobControlError(f"benchmark jar {self.spec.jar} is missing; run scripts/setup_local_flink.sh")
            self._jar_id = self.rest.upload_jar(self.spec.jar)
        return self._jar_id

    def submit(self, parallelism: int, *, checkpoint_interval_s: int | None = None, savepoint: str | None = None) -> str:
        """Run the job at ``parallelism`` (optionally from a savepoint); returns the job id."""
        conf: dict[str, str] = {}
        if checkpoint_interval_s is not None:
            conf["execution.checkpointing.interval"] = f"{checkpoint_interval_s}s"
        body: dict[str, Any] = {
            "entryClass": self.spec.entry_class,
            "programArgsList": self.spec.program_args(),
            "parallelism": int(parallelism),
            "flinkConfiguration": conf,
        }
        if savepoint:
            body.update(savepointPath=savepoint, allowNonRestoredState=False)
        try:
            answer = self.rest.post(f"/jars/{self.jar_id()}/run", body)
        except RestError as exc:
            raise JobControlError(f"submitting job {self.spec.name!r} at parallelism {parallelism}: {exc}") from None
        return answer["jobid"]

    def running_since(self, jid: str, parallelism: int | None = None) -> float | None:
        """Epoch seconds at which the last subtask became RUNNING, or None while any is not RUNNING."""
        latest = 0.0
        for v in self.vertices(jid):
            if parallelism is not None and int(v.get("parallelism", -1)) != parallelism:
                return None
            times = self.rest.get(f"/jobs/{jid}/vertices/{v['id']}/subtasktimes").get("subtasks", [])
            if not times:
                return None
            for st in times:
                ts = st.get("timestamps", {})
                running = ts.get("RUNNING") or ts.get("running")
                if not running:
                    return None
                latest = max(latest, running / 1000.0)
        return latest or None

    def wait_running(self, jid: str, *, parallelism: int | None = None, timeout_s: float = 90.0, after: float = 0.0) -> float:
        """Wait until every subtask runs (at ``parallelism``) with a RUNNING time after ``after``; return that time."""
        deadline = time.monotonic() + timeout_s
        last: Any = None
        while time.monotonic() < deadline:
            try:
                d = self.details(jid)
                last = d.get("state")
                if last in _ENDED:
                    raise JobControlError(f"job {self.spec.name!r} ({jid}) ended in state {last} while waiting for it to run")
                if last == "RUNNING":
                    t = self.running_since(jid, parallelism)
                    if t is not None and t >= after:
                        return t
            except RestError as exc:
                last = str(exc)
            time.sleep(0.2)
        raise JobControlError(
            f"job {self.spec.name!r} ({jid}) was not running at parallelism {parallelism} within "
            f"{timeout_s:.0f} s (last state: {last})"
        )

    def parallelism(self, jid: str) -> int:
        return max(int(v.get("parallelism", 1)) for v in self.vertices(jid))

    # -- reconfigure ---------------------------------------------------------------------------------
    def stop_with_savepoint(self, jid: str, directory: str, timeout_s: float = 60.0) -> str:
        """Stop the job with a savepoint into ``directory``; returns the savepoint location."""
        rid = self.rest.post(f"/jobs/{jid}/stop", {"targetDirectory": directory, "drain": False})["request-id"]
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            ans = self.rest.get(f"/jobs/{jid}/savepoints/{rid}")
            if ans.get("status", {}).get("id") == "COMPLETED":
                op = ans.get("operation", {})
                if "location" in op:
                    return op["location"]
                raise JobControlError(f"stop-with-savepoint of {self.spec.name!r} ({jid}) failed: {op.get('failure-cause', op)}")
            time.sleep(0.1)
        raise JobControlError(f"stop-with-savepoint of {self.spec.name!r} ({jid}) did not complete within {timeout_s:.0f} s")

    def rescale_in_place(self, jid: str, parallelism: int) -> None:
        """Ask the adaptive scheduler for ``parallelism`` on every vertex, then trigger a checkpoint so it acts now."""
        req = self.rest.get(f"/jobs/{jid}/resource-requirements")
        body = {vid: {"parallelism": {"lowerBound": 1, "upperBound": int(parallelism)}} for vid in req}
        self.rest.put(f"/jobs/{jid}/resource-requirements", body)
        try:
            self.rest.post(f"/jobs/{jid}/checkpoints", {"checkpointType": "FULL"})
        except RestError:
            pass  # a checkpoint already in progress serves the same purpose

    def checkpoint_interval_s(self, jid: str) -> float:
        return float(self.rest.get(f"/jobs/{jid}/checkpoints/config").get("interval", 0)) / 1000.0
