"""How a configuration change is carried out: the one in-place rule and the modes realizers report.

Use :func:`same_shape` wherever "can this change rescale in place?" is asked (the policy's wording,
the twin's mechanics, the Kubernetes patch, the local-Flink realizer): only the parallelism (job or
per vertex) may differ; slots, CPU and memory per TaskManager and the checkpoint interval are the
*shape*, and changing any of them is a savepoint redeploy. Whether a cluster can rescale in place at
all (Flink >= 1.18 with the adaptive scheduler; the twin's profile) is that cluster's own condition,
checked beside this rule. Every :class:`~flinktune.decision.stages.RealizeResult` reports one
:class:`ReconfigMode`.
"""

from __future__ import annotations

from enum import Enum

from flinktune.config_space import Configuration

__all__ = ["ReconfigMode", "Shape", "same_shape", "shape_of"]

#: (task_slots, cpu, memory_mb, checkpoint_interval_s): what an in-place rescale keeps.
Shape = tuple[int, float, int, int]


class ReconfigMode(str, Enum):
    """What applying a configuration did (stored as its value in the state store)."""

    NOOP = "noop"  # already in force: nothing changed
    IN_PLACE = "in-place"  # parallelism only, rescaled without a redeploy
    REDEPLOY = "redeploy"  # savepoint, tear down, redeploy with the new shape, restore
    RESTART = "restart"  # reactive mode: the job restarts from its last checkpoint at the new parallelism
    DRY_RUN = "dry-run"  # the change was computed and shown, not applied
    ROLLED_BACK = "rolled-back"  # applied, did not become ready in time, and was restored

    def __str__(self) -> str:
        return self.value


def shape_of(cfg: Configuration) -> Shape:
    """The knobs an in-place rescale cannot change."""
    return (cfg.task_slots, cfg.cpu, cfg.memory_mb, cfg.checkpoint_interval_s)


def same_shape(current: Configuration, target: Configuration) -> bool:
    """True when only the parallelism (job or per vertex) differs: the change can rescale in place
    where the cluster supports it."""
    return shape_of(current) == shape_of(target)
