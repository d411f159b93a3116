"""A job on a local cluster, found again by a process that did not start it (``FLINKTUNE_CLUSTER=local-flink``).

Use :func:`write_attachment` where the cluster and the job are started (the rehearsal,
:mod:`flinktune.rehearsal`) and :func:`attach` in the decide task (``jobs.decide``): each decide
run is a new process in an Airflow worker, so it cannot hold the realizer the starter built. The
attachment file ``<FLINKTUNE_FLINK_JOBS_DIR>/<job>.json`` names the cluster's state folder (its
``state.json`` has the PIDs and ports), the benchmark job's spec and the job's configuration
space. The configuration in force is read back from the cluster itself (parallelism and
checkpoint interval from REST, the TaskManagers' shape from the cluster's state), never from the
file, so a change another process made is seen.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from flinktune.config_space import ConfigSpace, Configuration
from flinktune.job_name import job_name
from flinktune.lake.atomic import atomic_write
from flinktune.localflink.cluster import ClusterSpec, LocalFlinkCluster
from flinktune.localflink.jobcontrol import JobControl, JobSpec
from flinktune.localflink.realizer import LocalFlinkRealizer

__all__ = ["AttachError", "Attachment", "attach", "attachment_path", "read_attachment", "write_attachment"]


class AttachError(RuntimeError):
    """No attachment for the job, or its cluster does not run; the message names the file or folder."""


@dataclass(frozen=True)
class Attachment:
    """What a process needs to drive ``job`` on a running local cluster."""

    job: str
    cluster_dir: str
    jar: str
    rate_file: str
    work: int
    keys: int
    parallelism: tuple[int, ...]
    task_slots: int = 1
    cpu: float = 1.0
    memory_mb: int = 1024
    checkpoint_interval_s: int = 10
    wait_us: int = 0

    def space(self) -> ConfigSpace:
        """The job's configuration space: only the parallelism varies (one TaskManager shape)."""
        return ConfigSpace(
            parallelism=tuple(self.parallelism),
            task_slots=(self.task_slots,),
            cpu=(self.cpu,),
            memory_mb=(self.memory_mb,),
            checkpoint_interval_s=(self.checkpoint_interval_s,),
        )

    def job_spec(self) -> JobSpec:
        return JobSpec(
            jar=Path(self.jar),
            name=self.job,
            rate_file=Path(self.rate_file),
            work=self.work,
            keys=self.keys,
            wait_us=self.wait_us,
        )


def attachment_path(jobs_dir: Path, job: str) -> Path:
    return Path(jobs_dir) / f"{job_name(job)}.json"


def write_attachment(jobs_dir: Path, attachment: Attachment) -> Path:
    """Write ``attachment`` as ``<jobs_dir>/<job>.json`` (atomically); returns the path."""
    path = attachment_path(jobs_dir, attachment.job)
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(path, json.dumps(asdict(attachment), indent=2).encode())
    return path


def read_attachment(jobs_dir: Path, job: str) -> Attachment:
    path = attachment_path(jobs_dir, job)
    try:
        raw: dict[str, Any] = json.loads(path.read_text())
    except FileNotFoundError:
        raise AttachError(
            f"FLINKTUNE_CLUSTER=local-flink: no attachment {path} for job {job!r}; the rehearsal writes it when it starts the job"
        ) from None
    except ValueError as exc:
        raise AttachError(f"{path}: not a job attachment ({exc})") from None
    try:
        raw["parallelism"] = tuple(int(p) for p in raw["parallelism"])
        return Attachment(**raw)
    except (KeyError, TypeError, ValueError) as exc:
        raise AttachError(f"{path}: not a job attachment ({type(exc).__name__}: {exc})") from None


def attach(jobs_dir: Path, job: str) -> tuple[LocalFlinkRealizer, ConfigSpace]:
    """A realizer for ``job``'s running deployment and the job's space; the config in force from the cluster."""
    a = read_attachment(jobs_dir, job)
    cluster = LocalFlinkCluster(a.cluster_dir, ClusterSpec(tm_slots=a.task_slots, tm_memory_mb=a.memory_mb))
    if not cluster.status()["running"]:
        raise AttachError(f"job {job!r}: no cluster runs from {a.cluster_dir}")
    control = JobControl(cluster.rest, a.job_spec())
    jid = control.require_job()
    interval = control.checkpoint_interval_s(jid)
    tms = cluster.taskmanagers()
    config = Configuration(
        parallelism=control.parallelism(jid),
        task_slots=tms[0].slots if tms else a.task_slots,
        cpu=a.cpu,
        memory_mb=tms[0].memory_mb if tms else a.memory_mb,
        checkpoint_interval_s=int(round(interval)) if interval > 0 else a.checkpoint_interval_s,
    )
    return LocalFlinkRealizer(cluster, control, config), a.space()
