"""The cluster profile: every parameter of the twin, with a default and a description.

Use :meth:`ClusterProfile.default` for the shipped calibration (``flinktune/resources/cluster_profile.yaml``),
:meth:`ClusterProfile.from_yaml` for a profile file (possibly written by calibration) and
:meth:`ClusterProfile.to_yaml` to save one. The job itself (its vertices, costs and state) is the
``dataflow`` field: a built-in name (``ysb``, ``tsw``), a path to a job YAML (relative to the
profile file) or an inline mapping; see :mod:`flinktune.twin.dataflow`.

Units: seconds, MB, cores, records/s, milliseconds as each field's name says.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from flinktune.lake.atomic import atomic_write
from flinktune.twin.dataflow import BUILTIN_DATAFLOWS, DataflowError, DataflowSpec, builtin_dataflow, load_dataflow

__all__ = ["ClusterProfile", "ProfileError"]


class ProfileError(ValueError):
    """A cluster profile file is invalid; the message names the file and the key."""


class ClusterProfile(BaseModel):
    """Parameters of the simulated Flink-on-Kubernetes cluster and job (see docs/DESIGN.md section 6)."""

    model_config = ConfigDict(extra="forbid", frozen=True, validate_default=True)

    dataflow: DataflowSpec = Field(
        default_factory=lambda: builtin_dataflow("ysb"),
        description="The job: a built-in name (ysb, tsw), a job YAML path (relative to this file) or a mapping.",
    )
    # --- compute ---
    core_knee: float = Field(1.0, gt=0, description="Cores per slot up to which each core is fully effective.")
    extra_core_efficiency: float = Field(
        0.7, ge=0, le=1, description="Worth of the first core beyond the knee (diminishing returns)."
    )
    extra_core_exponent: float = Field(
        0.85, gt=0, le=1, description="Exponent on cores beyond the knee (<1: each further core is worth less)."
    )
    shared_core_knee: float = Field(
        0.0,
        ge=0,
        le=1,
        description="Cores per slot below which slots sharing a core contend (context switches, cache misses); 0: no contention.",
    )
    shared_core_exponent: float = Field(
        0.5,
        ge=0,
        le=3,
        description="How fast a shared core loses worth below shared_core_knee: worth x (cores/knee) ** exponent.",
    )
    coordination_overhead: float = Field(
        0.004, ge=0, description="Extra per-record cost per additional subtask, every vertex (coordination)."
    )
    shuffle_overhead: float = Field(
        0.008, ge=0, description="Extra per-record cost per additional subtask on rebalance/hash vertices (network shuffle)."
    )
    idle_cores_per_tm: float = Field(0.05, ge=0, description="Cores a TaskManager burns when idle (JVM, heartbeats).")
    cpu_per_busy: float = Field(
        1.0,
        gt=0,
        le=2,
        description="CPU cores used per core-second of work the capacity model charges (busy time); below 1 when the "
        "job's threads are busy without using a core (blocking lookups, I/O). Fitted on measured CPU load "
        "(flinktune.calibration.cpu); 1: CPU = busy work.",
    )
    # --- memory ---
    tm_overhead_mb: float = Field(
        600.0,
        ge=0,
        description="TaskManager process memory outside Flink memory (JVM overhead, metaspace, framework off-heap), MB.",
    )
    slot_heap_fraction: float = Field(
        0.6, gt=0, le=1, description="Share of the remaining memory that is task heap (the rest: network and managed memory)."
    )
    task_base_mb: float = Field(160.0, ge=0, description="Heap a slot needs for its tasks before state and buffers, MB.")
    network_mb_per_channel: float = Field(
        0.5, ge=0, description="Network buffer memory per slot per channel (one channel per downstream subtask), MB."
    )
    state_heap_factor: float = Field(
        2.0, ge=1, description="Heap bytes per byte of checkpointed state (object overhead of the heap state backend)."
    )
    gc_pressure_start: float = Field(
        0.6, gt=0, lt=1, description="Memory pressure (need / available per slot) above which GC slows processing."
    )
    gc_slowdown: float = Field(
        1.5, ge=0, description="Extra processing time from GC at pressure 1.0 (quadratic from gc_pressure_start)."
    )
    gc_max_slowdown: float = Field(5.0, ge=1, description="Cap on the GC slowdown factor.")
    gc_pause_ms: float = Field(
        80.0, ge=0, description="Tail-latency pause per unit of GC slowdown, ms (added to p99, half to p95)."
    )
    oom_pressure_start: float = Field(
        0.9, gt=0, description="Memory pressure above which TaskManagers start failing (OOM kills)."
    )
    oom_failures_per_hour: float = Field(
        6.0, ge=0, description="Failure rate per hour at pressure 1.0 (grows linearly from oom_pressure_start)."
    )
    jvm_base_used_mb: float = Field(180.0, ge=0, description="Heap used by an idle TaskManager, MB.")
    inflight_mb_per_krps: float = Field(0.8, ge=0, description="Heap used by records in flight per 1000 rec/s of throughput, MB.")
    # --- checkpoints ---
    checkpoint_base_s: float = Field(
        0.3, ge=0, description="Fixed part of a checkpoint's duration (barrier alignment, coordination), s."
    )
    checkpoint_upload_mb_s: float = Field(25.0, gt=0, description="State upload bandwidth per subtask, MB/s.")
    checkpoint_sync_base_s: float = Field(0.15, ge=0, description="Synchronous pause of the task threads per checkpoint, s.")
    checkpoint_sync_s_per_mb: float = Field(0.01, ge=0, description="Extra synchronous pause per MB of state per subtask, s.")
    checkpoint_async_overhead: float = Field(
        0.05, ge=0, lt=1, description="Capacity lost while a checkpoint uploads asynchronously (fraction)."
    )
    # --- failures and recovery ---
    failure_detection_s: float = Field(
        20.0, ge=0, description="Time from a fault to the restart (heartbeat timeout); nothing is processed."
    )
    restart_base_s: float = Field(5.0, ge=0, description="Fixed restart time after detection (reschedule, replace the pod), s.")
    restart_per_tm_s: float = Field(0.3, ge=0, description="Extra restart time per TaskManager, s.")
    restore_mb_s: float = Field(50.0, gt=0, description="State restore bandwidth per subtask, MB/s.")
    tm_rejoin_s: float = Field(
        30.0,
        ge=0,
        description="Seconds from a TaskManager fault until it (or its replacement) registers again; in reactive mode "
        "that is a second restart. Demeter's injected fault is a 30 s network delay of one TaskManager.",
    )
    warmup_s: float = Field(20.0, ge=0, description="Seconds after a (re)start until full speed (JIT, caches, lazy state).")
    rescale_warmup_s: float | None = Field(
        None,
        ge=0,
        description="Warm-up after a rescale restart (reactive mode, in-place rescale), whose TaskManagers keep running, s; "
        "empty: warmup_s. Fitted on measured reactive-mode rescales (flinktune.calibration.restart).",
    )
    redeploy_warmup_s: float | None = Field(
        None,
        ge=0,
        description="Warm-up after a savepoint redeploy, whose TaskManagers are new pods (cold JVMs), s; empty: warmup_s. "
        "Fitted on measured savepoint redeploys (the operator autoscaler's and Demeter's scale-downs: "
        "flinktune.calibration.redeploy_downtime, or on their latency: flinktune.calibration.redeploy_warmup).",
    )
    warmup_initial_capacity: float = Field(
        0.5, gt=0, le=1, description="Fraction of capacity right after a (re)start (ramps linearly to 1)."
    )
    failure_lead_s: int = Field(
        5, ge=1, description="Scheduled failures hit this many seconds before a checkpoint is due (maximal replay)."
    )
    # --- reconfiguration ---
    adaptive_scheduler: bool = Field(
        True, description="Adaptive scheduler on (Flink >= 1.18): parallelism-only changes rescale in place."
    )
    rescale_base_s: float = Field(4.0, ge=0, description="Pause of an in-place rescale, s (plus state redistribution).")
    tm_start_s: float = Field(6.0, ge=0, description="Time to start new TaskManager pods when a rescale needs more, s.")
    rescale_replays_from_checkpoint: bool = Field(
        False, description="In-place rescale restarts from the last checkpoint (replay) instead of a fresh one taken first."
    )
    savepoint_base_s: float = Field(3.0, ge=0, description="Fixed time to take the savepoint before a redeploy, s.")
    redeploy_base_s: float = Field(
        25.0,
        ge=0,
        description="Fixed time to tear down and redeploy the job (JobManager, pods), s. "
        "Fitted on the backlog after measured savepoint redeploys (the operator autoscaler's and Demeter's "
        "scale-downs: flinktune.calibration.redeploy_downtime).",
    )
    redeploy_per_tm_s: float = Field(0.8, ge=0, description="Extra redeploy time per new TaskManager, s.")
    # --- latency ---
    base_latency_ms: float = Field(
        40.0, ge=0, description="Latency of an idle pipeline (network, buffer timeout), ms, besides vertex latency_ms."
    )
    queue_ms: float = Field(50.0, ge=0, description="Queueing scale: mean wait is queue_ms * u / (1 - u) at utilisation u, ms.")
    utilisation_cap: float = Field(
        0.98, gt=0, lt=1, description="Highest utilisation used in the queueing term (saturation shows as lag)."
    )
    latency_noise: float = Field(0.06, ge=0, description="Log-normal noise (sigma) on per-second latency samples.")
    memory_noise: float = Field(0.02, ge=0, description="Relative noise on heap-used samples.")
    cpu_noise: float = Field(0.02, ge=0, description="Relative noise on CPU-load samples.")

    @field_validator("dataflow", mode="before")
    @classmethod
    def _dataflow_by_name(cls, value: Any) -> Any:
        if isinstance(value, str):
            if value in BUILTIN_DATAFLOWS:
                return builtin_dataflow(value)
            return load_dataflow(value)
        return value

    @classmethod
    def default(cls, workload: str = "ysb") -> ClusterProfile:
        """The shipped profile with the built-in job ``workload`` (``ysb`` or ``tsw``)."""
        res = resources.files("flinktune") / "resources" / "cluster_profile.yaml"
        data = yaml.safe_load(res.read_text()) or {}
        data["dataflow"] = workload
        return cls._validate(data, "flinktune/resources/cluster_profile.yaml")

    @classmethod
    def from_yaml(cls, path: str | Path) -> ClusterProfile:
        """Load a profile; unknown or invalid keys raise :class:`ProfileError` naming file and key."""
        path = Path(path)
        try:
            data = yaml.safe_load(path.read_text())
        except (OSError, yaml.YAMLError) as exc:
            raise ProfileError(f"{path}: cannot read cluster profile: {exc}") from None
        data = data or {}
        if not isinstance(data, dict):
            raise ProfileError(f"{path}: expected a mapping at the top level, got {type(data).__name__}")
        flow = data.get("dataflow")
        if isinstance(flow, str) and flow not in BUILTIN_DATAFLOWS:
            data["dataflow"] = str((path.parent / flow).resolve()) if not Path(flow).is_absolute() else flow
        return cls._validate(data, str(path))

    @classmethod
    def _validate(cls, data: dict[str, Any], where: str) -> ClusterProfile:
        unknown = sorted(set(data) - set(cls.model_fields))
        if unknown:
            raise ProfileError(f"{where}: unknown key(s) {unknown}; allowed: {sorted(cls.model_fields)}")
        try:
            return cls.model_validate(data)
        except DataflowError as exc:
            raise ProfileError(f"{where}: key 'dataflow': {exc}") from None
        except ValidationError as exc:
            first = exc.errors()[0]
            loc = ".".join(str(p) for p in first["loc"])
            raise ProfileError(f"{where}: key {loc!r}: {first['msg']} (got {first.get('input')!r})") from None

    def with_(self, **changes: Any) -> ClusterProfile:
        """A validated copy with some parameters changed."""
        data = self.model_dump()
        data.update(changes)
        return self._validate(data, "ClusterProfile.with_")

    def to_yaml(self, path: str | Path) -> Path:
        """Write the profile (each key preceded by its description) atomically; returns the path."""
        path = Path(path)
        lines = ["# flinktune twin cluster profile (see flinktune/twin/profile.py for the model)."]
        for name, info in type(self).model_fields.items():
            value = getattr(self, name)
            lines.append(f"# {info.description}")
            if isinstance(value, DataflowSpec) and value.name in BUILTIN_DATAFLOWS and value == builtin_dataflow(value.name):
                dumped = yaml.safe_dump({name: value.name}, sort_keys=False)
            elif isinstance(value, DataflowSpec):
                dumped = yaml.safe_dump({name: value.model_dump(mode="json")}, sort_keys=False)
            else:
                dumped = yaml.safe_dump({name: value}, sort_keys=False)
            lines.append(dumped.rstrip("\n"))
        return atomic_write(path, ("\n".join(lines) + "\n").encode())
