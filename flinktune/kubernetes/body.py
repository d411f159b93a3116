"""FlinkDeployment bodies and patches for a :class:`Configuration`, touching only the fields we own.

Owned fields (nothing else of the object is ever written):
``spec.flinkConfiguration`` keys ``taskmanager.numberOfTaskSlots``,
``execution.checkpointing.interval``, ``pipeline.jobvertex-parallelism-overrides`` and
``jobmanager.scheduler``; ``spec.taskManager.resource.cpu`` / ``.memory``; ``spec.job.parallelism``
and ``spec.job.upgradeMode``. Use :func:`deployment_body` to create a job, :func:`config_patch` to
move a running one (in place when only parallelism changes, a savepoint upgrade otherwise),
:func:`config_from_object` to read back what runs, and :func:`dry_run_diff` to show a change.
"""

from __future__ import annotations

import copy
import difflib
from collections import Counter
from collections.abc import Mapping
from typing import Any

import yaml

from flinktune.config_space import ConfigError, Configuration
from flinktune.decision.reconfig import ReconfigMode, same_shape

__all__ = [
    "CHECKPOINT_KEY",
    "OVERRIDES_KEY",
    "SCHEDULER_KEY",
    "SLOTS_KEY",
    "config_from_object",
    "config_patch",
    "deployment_body",
    "dry_run_diff",
    "is_in_place",
    "merge_patch",
]

OVERRIDES_KEY = "pipeline.jobvertex-parallelism-overrides"
SLOTS_KEY = "taskmanager.numberOfTaskSlots"
CHECKPOINT_KEY = "execution.checkpointing.interval"
SCHEDULER_KEY = "jobmanager.scheduler"
_IN_PLACE_VERSIONS = ("v1_18", "v1_19", "v1_20", "v2_0", "v2_1", "v2_2")


def _overrides(config: Configuration, vertex_ids: Mapping[str, str]) -> str:
    # Every vertex gets an entry so a job-level parallelism change also rescales in place.
    per = config.vertex_overrides()
    unknown = sorted(set(per) - set(vertex_ids))
    if unknown:
        raise ConfigError(
            f"vertex_parallelism names vertices without a known job vertex id: {unknown}; known: {sorted(vertex_ids)}"
        )
    return ",".join(f"{vertex_ids[v]}:{per.get(v, config.parallelism)}" for v in sorted(vertex_ids, key=lambda v: vertex_ids[v]))


def _owned(config: Configuration, vertex_ids: Mapping[str, str]) -> dict[str, Any]:
    conf = {SLOTS_KEY: str(config.task_slots), CHECKPOINT_KEY: f"{config.checkpoint_interval_s}s", SCHEDULER_KEY: "adaptive"}
    if vertex_ids:
        conf[OVERRIDES_KEY] = _overrides(config, vertex_ids)
    return {
        "flinkConfiguration": conf,
        "taskManager": {"resource": {"cpu": float(config.cpu), "memory": f"{config.memory_mb}m"}},
        "job": {"parallelism": config.parallelism, "upgradeMode": "savepoint"},
    }


def deployment_body(
    name: str,
    namespace: str,
    config: Configuration,
    *,
    image: str,
    jar_uri: str,
    vertex_ids: Mapping[str, str] | None = None,
    flink_version: str = "v1_20",
    service_account: str = "flink",
    jobmanager_memory: str = "1024m",
) -> dict[str, Any]:
    """A complete FlinkDeployment (application mode, savepoint upgrades, adaptive scheduler)."""
    owned = _owned(config, vertex_ids or {})
    return {
        "apiVersion": "flink.apache.org/v1beta1",
        "kind": "FlinkDeployment",
        "metadata": {"name": name, "namespace": namespace, "labels": {"app.kubernetes.io/managed-by": "flinktune"}},
        "spec": {
            "image": image,
            "flinkVersion": flink_version,
            "serviceAccount": service_account,
            "flinkConfiguration": owned["flinkConfiguration"],
            "jobManager": {"resource": {"cpu": 1.0, "memory": jobmanager_memory}},
            "taskManager": owned["taskManager"],
            "job": {"jarURI": jar_uri, **owned["job"], "state": "running"},
        },
    }


def _memory_mb(text: str, where: str) -> int:
    units = {"m": 1, "mi": 1, "g": 1024, "gi": 1024}
    t = str(text).strip().lower()
    for suffix in sorted(units, key=len, reverse=True):
        if t.endswith(suffix) and t[: -len(suffix)].replace(".", "", 1).isdigit():
            return int(round(float(t[: -len(suffix)]) * units[suffix]))
    raise ConfigError(f"{where}: memory {text!r} is not in m/mi/g/gi units")


def config_from_object(obj: Mapping[str, Any], vertex_ids: Mapping[str, str] | None = None) -> Configuration:
    """The configuration a FlinkDeployment object asks for (errors name the field)."""
    name = (obj.get("metadata") or {}).get("name", "?")
    spec = obj.get("spec") or {}
    try:
        conf = spec.get("flinkConfiguration") or {}
        res = spec["taskManager"]["resource"]
        p = int(spec["job"]["parallelism"])
        ck = str(conf.get(CHECKPOINT_KEY, "10s")).strip().lower()
        ck_s = int(ck[:-2]) // 1000 if ck.endswith("ms") else int(ck.rstrip("s"))
        ids = {v: k for k, v in (vertex_ids or {}).items()}
        overrides: dict[str, int] = {}
        for item in filter(None, str(conf.get(OVERRIDES_KEY, "")).split(",")):
            vid, _, par = item.partition(":")
            overrides[ids.get(vid.strip(), vid.strip())] = int(par)
        if vertex_ids and set(vertex_ids) <= set(overrides):
            # An in-place rescale leaves spec.job.parallelism as deployed (changing it makes the operator
            # redeploy) and writes every vertex's override: the overrides are what runs, the job's
            # parallelism is their most common value (the larger on a tie).
            counts = Counter(overrides[v] for v in vertex_ids)
            p = max(counts, key=lambda v: (counts[v], v))
        per = {v: par for v, par in overrides.items() if par != p}
        return Configuration(
            p,
            int(conf.get(SLOTS_KEY, 1)),
            float(res["cpu"]),
            _memory_mb(res["memory"], f"FlinkDeployment {name} spec.taskManager.resource.memory"),
            ck_s,
            vertex_parallelism=tuple(sorted(per.items())),
        )
    except (KeyError, TypeError, ValueError) as exc:
        if isinstance(exc, ConfigError):
            raise
        raise ConfigError(f"FlinkDeployment {name}: cannot read the configuration from spec: {exc!r}") from None


def is_in_place(current: Configuration, target: Configuration, flink_version: str) -> bool:
    """True when only parallelism changes and Flink >= 1.18 (adaptive scheduler rescales in place)."""
    return same_shape(current, target) and flink_version in _IN_PLACE_VERSIONS


def config_patch(
    obj: Mapping[str, Any], target: Configuration, vertex_ids: Mapping[str, str]
) -> tuple[dict[str, Any], ReconfigMode]:
    """(JSON merge patch, mode) moving ``obj`` to ``target``; mode is ``IN_PLACE`` or ``REDEPLOY`` (savepoint).

    In place: only the parallelism overrides change (``spec.job.parallelism`` stays, since the
    operator redeploys on any other spec change). Savepoint: every owned field is written.
    ``metadata.resourceVersion`` is included so a concurrent writer makes the patch fail (409).
    """
    current = config_from_object(obj, vertex_ids)
    version = str((obj.get("spec") or {}).get("flinkVersion", ""))
    owned = _owned(target, vertex_ids)
    rv = (
        {"resourceVersion": (obj.get("metadata") or {}).get("resourceVersion")}
        if (obj.get("metadata") or {}).get("resourceVersion")
        else {}
    )
    if vertex_ids and is_in_place(current, target, version):
        patch: dict[str, Any] = {
            "spec": {"flinkConfiguration": {OVERRIDES_KEY: owned["flinkConfiguration"][OVERRIDES_KEY], SCHEDULER_KEY: "adaptive"}}
        }
        mode = ReconfigMode.IN_PLACE
    else:
        patch = {"spec": owned}
        mode = ReconfigMode.REDEPLOY
    if rv:
        patch["metadata"] = rv
    return patch, mode


def merge_patch(obj: Mapping[str, Any], patch: Mapping[str, Any]) -> dict[str, Any]:
    """RFC 7386 JSON merge patch applied to a copy of ``obj``."""
    out = copy.deepcopy(dict(obj))
    for k, v in patch.items():
        if v is None:
            out.pop(k, None)
        elif isinstance(v, Mapping) and isinstance(out.get(k), Mapping):
            out[k] = merge_patch(out[k], v)
        else:
            out[k] = copy.deepcopy(v)
    return out


def dry_run_diff(obj: Mapping[str, Any], patch: Mapping[str, Any]) -> str:
    """A unified diff of the object's spec before and after ``patch`` (what a dry run prints)."""
    before = yaml.safe_dump({"spec": dict(obj.get("spec") or {})}, sort_keys=True).splitlines(keepends=True)
    after = yaml.safe_dump({"spec": merge_patch(obj, patch).get("spec", {})}, sort_keys=True).splitlines(keepends=True)
    name = (obj.get("metadata") or {}).get("name", "flinkdeployment")
    return "".join(difflib.unified_diff(before, after, fromfile=f"{name} (running)", tofile=f"{name} (proposed)"))
