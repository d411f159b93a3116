"""Tuning policies, each a :class:`flinktune.stages.Policy`, by name.

Use :func:`make_policy` to build one from its name; :data:`POLICY_NAMES` lists them.
"""

from __future__ import annotations

from flinktune.config_space import ConfigSpace
from flinktune.policies.demeter import DemeterPolicy
from flinktune.policies.flinktune_policy import FlinktunePolicy
from flinktune.policies.static import StaticPolicy
from flinktune.stages import Policy

__all__ = ["POLICY_NAMES", "make_policy", "DemeterPolicy", "FlinktunePolicy", "StaticPolicy"]

_FACTORIES = {
    "static": StaticPolicy,
    "demeter": DemeterPolicy,
    "flinktune": FlinktunePolicy,
}
POLICY_NAMES: tuple[str, ...] = tuple(_FACTORIES)


def make_policy(name: str, space: ConfigSpace, *, confidence: float = 0.95) -> Policy:
    """The policy called ``name``; unknown names raise ``ValueError`` listing the known ones."""
    try:
        factory = _FACTORIES[name]
    except KeyError:
        raise ValueError(f"unknown policy {name!r}; known policies: {', '.join(POLICY_NAMES)}") from None
    if factory is StaticPolicy:
        return StaticPolicy(space)
    return factory(space, confidence=confidence)
