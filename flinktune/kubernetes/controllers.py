"""One controller per job: whether another controller already sizes a FlinkDeployment.

Use :func:`other_controller` on the object the realizer read, before any change: the Flink
Kubernetes Operator's own autoscaler (``job.autoscaler.enabled: true`` in
``spec.flinkConfiguration``) rescales the same job vertices flinktune patches, so two controllers
would undo each other's changes. Such a job is held, with this one-line reason, until the user
turns one of them off.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["AUTOSCALER_KEYS", "other_controller"]

#: The operator autoscaler's switch, under its current key and the ``kubernetes.operator.`` prefixed one it still reads.
AUTOSCALER_KEYS = ("job.autoscaler.enabled", "kubernetes.operator.job.autoscaler.enabled")


def other_controller(obj: Mapping[str, Any]) -> str | None:
    """Why flinktune must not change this FlinkDeployment (another controller sizes it), or None."""
    conf = ((obj.get("spec") or {}).get("flinkConfiguration")) or {}
    meta = obj.get("metadata") or {}
    where = f"FlinkDeployment {meta.get('namespace', '?')}/{meta.get('name', '?')}"
    for key in AUTOSCALER_KEYS:
        if str(conf.get(key, "")).strip().lower() == "true":
            return (
                f"{where} has the operator's autoscaler on ({key}: true): two controllers would fight over its "
                f"parallelism; flinktune holds until one is turned off ({key}: false, or remove the flinktune.io/managed label)"
            )
    return None
