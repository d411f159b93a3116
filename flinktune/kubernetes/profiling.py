"""Short-lived profiling deployments on a real cluster (Demeter's PROFILE step, without failure injection).

Use :func:`run_profiling_deployment` to measure one :class:`Configuration` of a production job:
it reads the production FlinkDeployment ``base_job``, creates a copy named
``<base_job>-profile-<8 hex of the config>`` with the configuration applied (same image, jar and
arguments, consuming the same input topic), waits until the job runs, lets it warm up, measures a
window through a :class:`~flinktune.decision.stages.MetricsSource` and returns one
:data:`~flinktune.metrics.schema.PROFILING_COLUMNS` row. The copy is deleted at the end, always,
also when creation, start-up or measurement fails.

Output redirection convention: the production object must carry the annotation
``flinktune.io/profile-overrides`` (:data:`OVERRIDES_ANNOTATION`), a JSON object
``{"args": {"--output-topic": "{name}-out", "--group-id": "{name}"}, "flinkConfiguration": {"key": "{name}-out"}}``
whose values are templates (``{name}`` = the profiling deployment's name). ``args`` entries replace
the value after that flag in ``spec.job.args`` (or ``--flag=value``), appending ``flag value`` when
absent; ``flinkConfiguration`` entries are set. A profiling copy must not write into the
production output (nor, usually, share its Kafka consumer group), so a job without the annotation
is refused; a job that writes nothing worth redirecting declares ``{}``.

``recovery_s`` is left empty (NaN): failure injection on a shared cluster is not done here (it
would need Chaos Mesh rights and disturbs neighbours); the contract treats a null there as a warning.

Shapes: ``api`` is a ``kubernetes.client.CustomObjectsApi``; the metrics frame is the raw schema
(:mod:`flinktune.metrics.schema`) of job = the profiling deployment's name.
"""

from __future__ import annotations

import copy
import hashlib
import json
import math
import re
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import pandas as pd

from flinktune.clock import Clock, SystemClock
from flinktune.config_space import ConfigError, Configuration
from flinktune.decision.stages import MetricsSource
from flinktune.kubernetes.body import _memory_mb, deployment_body
from flinktune.kubernetes.crd import CRDSchema, load_crd_schema, validate_object
from flinktune.kubernetes.realizer import GROUP, PLURAL, VERSION
from flinktune.metrics.schema import PROFILING_COLUMNS, PROFILING_DTYPES, validate_frame

__all__ = [
    "OVERRIDES_ANNOTATION",
    "PROFILE_LABEL",
    "ProfilingDeployment",
    "ProfilingError",
    "ResourceBudget",
    "measure_row",
    "profiling_deployment",
    "run_profiling_deployment",
]

PROFILE_LABEL = "flinktune.io/profile-of"
OVERRIDES_ANNOTATION = "flinktune.io/profile-overrides"
_FAILED_JOB = {"FAILED", "FAILING", "CANCELED", "CANCELLING", "SUSPENDED"}
_FAILED_LIFE = {"FAILED", "ROLLED_BACK", "ROLLING_BACK"}
_DNS1035 = re.compile(r"^[a-z]([-a-z0-9]{0,61}[a-z0-9])?$")
# Metadata the API server owns: a copy carrying them is rejected or aliased to the original.
_SERVER_FIELDS = (
    "resourceVersion",
    "uid",
    "generation",
    "creationTimestamp",
    "managedFields",
    "ownerReferences",
    "finalizers",
    "selfLink",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
)


class ProfilingError(RuntimeError):
    """A profiling run could not be set up, did not start, or gave no measurement; names the deployment."""


@dataclass(frozen=True)
class ResourceBudget:
    """What one profiling deployment may reserve (JobManager + all TaskManagers): cores and MB.

    Defaults: Demeter's share for profiling on its cluster (50 cores, 430,000 MB).
    """

    cpu: float = 50.0
    memory_mb: int = 430_000


@dataclass(frozen=True)
class ProfilingDeployment:
    """The FlinkDeployment body of one profiling run and what it reserves."""

    name: str
    namespace: str
    body: dict[str, Any]
    reserved_cpu: float
    reserved_memory_mb: int


def _short_hash(config: Configuration) -> str:
    return hashlib.sha1(json.dumps(config.to_dict(), sort_keys=True).encode()).hexdigest()[:8]


def _set_arg(args: list[str], flag: str, value: str) -> list[str]:
    out = list(args)
    for i, a in enumerate(out):
        if a == flag and i + 1 < len(out):
            out[i + 1] = value
            return out
        if a.startswith(flag + "="):
            out[i] = f"{flag}={value}"
            return out
    return [*out, flag, value]


def _overrides(base: Mapping[str, Any], where: str) -> dict[str, dict[str, str]]:
    raw = ((base.get("metadata") or {}).get("annotations") or {}).get(OVERRIDES_ANNOTATION)
    if raw is None:
        raise ProfilingError(
            f"{where} has no annotation {OVERRIDES_ANNOTATION}: a profiling copy would write into the production output; "
            'declare e.g. {"args": {"--output-topic": "{name}-out"}} (or {} if the job has no output to redirect)'
        )
    try:
        data = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise ProfilingError(f"{where} annotation {OVERRIDES_ANNOTATION}: not JSON ({exc.msg} at column {exc.colno})") from None
    bad = sorted(set(data) - {"args", "flinkConfiguration"}) if isinstance(data, dict) else ["<not an object>"]
    if bad or not all(isinstance(v, dict) and all(isinstance(x, str) for x in v.values()) for v in data.values()):
        raise ProfilingError(
            f"{where} annotation {OVERRIDES_ANNOTATION}: expected an object with 'args' and/or "
            f"'flinkConfiguration' mapping names to string templates; unexpected {bad or data}"
        )
    return data


def profiling_deployment(
    base: Mapping[str, Any],
    config: Configuration,
    *,
    vertex_ids: Mapping[str, str] | None = None,
    schema: CRDSchema | None = None,
    budget: ResourceBudget | None = None,
) -> ProfilingDeployment:
    """The profiling copy of the production object ``base`` running ``config``, CRD-validated.

    Raises :class:`ProfilingError` when the copy would reserve more than ``budget`` or when the
    production object lacks the output-override annotation.
    """
    meta = base.get("metadata") or {}
    base_name, namespace = str(meta.get("name", "")), str(meta.get("namespace", ""))
    where = f"FlinkDeployment {namespace}/{base_name}"
    name = f"{base_name}-profile-{_short_hash(config)}"
    if not _DNS1035.match(name):
        raise ProfilingError(f"{where}: profiling deployment name {name!r} is not a DNS-1035 label of <= 63 characters")
    spec = copy.deepcopy(dict(base.get("spec") or {}))
    jm = (spec.get("jobManager") or {}).get("resource") or {}
    try:
        jm_cpu = float(jm.get("cpu", 1.0))
        jm_mem = _memory_mb(jm.get("memory", "1024m"), f"{where} spec.jobManager.resource.memory")
    except (ConfigError, TypeError, ValueError) as exc:
        raise ProfilingError(f"{where}: cannot read the JobManager resources: {exc}") from None
    cpu, mem = jm_cpu + config.total_cpu, jm_mem + config.total_memory_mb
    budget = budget or ResourceBudget()
    if cpu > budget.cpu + 1e-9 or mem > budget.memory_mb:
        raise ProfilingError(
            f"{where}: profiling {config.describe()} would reserve {cpu:g} cores and {mem} MB "
            f"(JobManager included), over the budget of {budget.cpu:g} cores and {budget.memory_mb} MB"
        )
    owned = deployment_body(name, namespace, config, image="-", jar_uri="-", vertex_ids=vertex_ids or {})["spec"]
    spec["flinkConfiguration"] = {**(spec.get("flinkConfiguration") or {}), **owned["flinkConfiguration"]}
    spec["taskManager"] = {
        **(spec.get("taskManager") or {}),
        "resource": {**((spec.get("taskManager") or {}).get("resource") or {}), **owned["taskManager"]["resource"]},
    }
    job = dict(spec.get("job") or {})
    for k in ("initialSavepointPath", "savepointTriggerNonce", "checkpointTriggerNonce"):
        job.pop(k, None)  # a fresh job: no production state, no inherited triggers
    # stateless: a throwaway job has no state worth a savepoint when it is deleted
    job.update(parallelism=config.parallelism, upgradeMode="stateless", state="running")
    over = _overrides(base, where)
    args = [str(a) for a in job.get("args") or []]
    for flag, template in over.get("args", {}).items():
        args = _set_arg(args, flag, template.format(name=name))
    if args:
        job["args"] = args
    for key, template in over.get("flinkConfiguration", {}).items():
        spec["flinkConfiguration"][key] = template.format(name=name)
    spec["job"] = job
    labels = {**(meta.get("labels") or {}), PROFILE_LABEL: base_name}
    body = {
        "apiVersion": base.get("apiVersion", f"{GROUP}/{VERSION}"),
        "kind": base.get("kind", "FlinkDeployment"),
        "metadata": {"name": name, "namespace": namespace, "labels": labels},
        "spec": spec,
    }
    validate_object(body, schema or load_crd_schema(), what=f"profiling FlinkDeployment {namespace}/{name}")
    return ProfilingDeployment(name, namespace, body, cpu, mem)


def measure_row(
    samples: pd.DataFrame,
    *,
    job: str,
    base_job: str,
    config: Configuration,
    rate: float | None,
    start_ms: int,
    end_ms: int,
    source_vertex: str | None = None,
) -> dict[str, Any]:
    """One PROFILING_COLUMNS row (``job`` = ``base_job``) from raw samples of ``job`` in ``[start_ms, end_ms)``.

    throughput: the source vertex's records out per second (summed over subtasks), or, without a
    ``source_vertex``, the max over vertices of records in per second (as ``features_1m``); latency:
    mean of ``latencyP95Ms``; cpu_used / memory_used_mb: means of ``cpuLoad`` / ``heapUsedMb``;
    input_rate: mean ``workloadRate`` when sampled, else ``rate``. Means are over seconds.
    """
    df = validate_frame(samples, where=f"metrics of profiling job {job}")
    df = df[(df["job"] == job) & (df["ts_ms"] >= start_ms) & (df["ts_ms"] < end_ms)]
    df = df.assign(sec=df["ts_ms"] // 1000)

    def per_second(metric: str) -> pd.Series:
        return df[df["metric"] == metric].groupby("sec")["value"].mean()

    if source_vertex:
        out = df[(df["metric"] == "numRecordsOutPerSecond") & (df["vertex"] == source_vertex)]
        thr = out.groupby(["sec", "subtask"])["value"].mean().groupby("sec").sum()
    else:
        inn = df[df["metric"] == "numRecordsInPerSecond"]
        thr = inn.groupby(["sec", "vertex", "subtask"])["value"].mean().groupby(["sec", "vertex"]).sum().groupby("sec").max()
    series = {
        "throughput": thr,
        "latency_ms": per_second("latencyP95Ms"),
        "cpu_used": per_second("cpuLoad"),
        "memory_used_mb": per_second("heapUsedMb"),
    }
    missing = sorted(k for k, s in series.items() if s.dropna().empty)
    if missing:
        raise ProfilingError(
            f"profiling job {job}: no samples for {missing} in [{start_ms}, {end_ms}) ms "
            f"(metrics present: {sorted(df['metric'].unique())})"
        )
    workload = per_second("workloadRate").dropna()
    if workload.empty and rate is None:
        raise ProfilingError(f"profiling job {job}: no workloadRate samples in [{start_ms}, {end_ms}) ms and no rate given")
    return {
        "job": base_job,
        "run_id": f"{job}-{start_ms // 1000}",
        "ts_ms": int(start_ms),
        **{k: getattr(config, k) for k in ("parallelism", "task_slots", "cpu", "memory_mb", "checkpoint_interval_s")},
        "input_rate": float(workload.mean()) if not workload.empty else float(rate),  # type: ignore[arg-type]  # rate is not None here: checked with workload.empty above
        **{k: float(s.dropna().mean()) for k, s in series.items()},
        "recovery_s": math.nan,  # no failure injection on a shared cluster
    }


def _state(obj: Mapping[str, Any]) -> tuple[str | None, str | None, str | None]:
    st = obj.get("status") or {}
    return st.get("lifecycleState"), (st.get("jobStatus") or {}).get("state"), st.get("error")


def run_profiling_deployment(
    api: Any,
    namespace: str,
    base_job: str,
    config: Configuration,
    *,
    rate: float | None,
    metrics_source: MetricsSource,
    clock: Clock | None = None,
    sleep: Callable[[float], None] = time.sleep,
    warmup_s: float = 120.0,
    measure_s: float = 60.0,
    timeout_s: float = 600.0,
    poll_s: float = 5.0,
    budget: ResourceBudget | None = None,
    vertex_ids: Mapping[str, str] | None = None,
    schema: CRDSchema | None = None,
    source_vertex: str | None = None,
) -> pd.DataFrame:
    """Create, wait for, measure and delete one profiling deployment; a one-row PROFILING_COLUMNS frame.

    ``timeout_s`` bounds the wait for RUNNING and, separately, the wait for the window's metrics
    to reach ``metrics_source`` (a lake fed every few minutes lags). Defaults follow Demeter
    (warm-up 120 s, 60 s measurement). Raises :class:`ProfilingError` naming the deployment and the
    last state or error; :class:`~flinktune.kubernetes.crd.CRDValidationError` for an invalid copy.
    The copy is deleted in every case once its creation was attempted (a 404 there is fine).
    """
    clock = clock or SystemClock()
    base = api.get_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, base_job)
    prof = profiling_deployment(base, config, vertex_ids=vertex_ids, schema=schema, budget=budget)
    where = f"profiling FlinkDeployment {namespace}/{prof.name}"
    from kubernetes.client.exceptions import ApiException

    try:
        try:
            api.create_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, prof.body)
        except ApiException as exc:  # 409: a leftover copy of an earlier run; it is deleted below
            raise ProfilingError(f"creating {where} failed (HTTP {exc.status}): {exc.reason}") from None
        deadline = clock.now() + timeout_s
        while True:
            life, job_state, error = _state(api.get_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, prof.name))
            if life in _FAILED_LIFE or job_state in _FAILED_JOB:
                raise ProfilingError(f"{where} did not start: lifecycle {life}, job {job_state}: {error or 'no detail'}")
            if job_state == "RUNNING":
                break
            if clock.now() >= deadline:
                raise ProfilingError(
                    f"{where} not RUNNING after {timeout_s:.0f} s (lifecycle {life}, job {job_state}, error {error or 'none'})"
                )
            sleep(poll_s)
        sleep(warmup_s)
        start_ms = int(clock.now() * 1000)
        sleep(measure_s)
        end_ms = int(clock.now() * 1000)
        deadline = clock.now() + timeout_s
        while True:  # the lake may lag behind the cluster by an extraction interval
            try:
                row = measure_row(
                    metrics_source.fetch(prof.name, start_ms, end_ms),
                    job=prof.name,
                    base_job=base_job,
                    config=config,
                    rate=rate,
                    start_ms=start_ms,
                    end_ms=end_ms,
                    source_vertex=source_vertex,
                )
                break
            except ProfilingError as exc:
                if clock.now() >= deadline:
                    raise ProfilingError(f"{where}: no measurement {timeout_s:.0f} s after the window: {exc}") from None
                sleep(poll_s)
    finally:
        try:  # also after a failed create: a timed-out request may still have created it
            api.delete_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, prof.name)
        except ApiException as exc:
            if exc.status != 404:
                raise ProfilingError(
                    f"deleting {where} failed (HTTP {exc.status}): {exc.reason}; "
                    f"delete it by hand (label {PROFILE_LABEL}={base_job})"
                ) from None
    df = pd.DataFrame([row], columns=list(PROFILING_COLUMNS))
    return df.astype(PROFILING_DTYPES)
