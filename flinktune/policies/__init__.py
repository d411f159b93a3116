"""Tuning policies, each a :class:`flinktune.decision.stages.Policy`, by name.

Use :func:`make_policy` to build one from its name; :data:`POLICY_NAMES` lists them: static (the
reference), demeter, flinktune (ours, in :mod:`flinktune.tuner`), reactive, ds2, autoscaler, sage,
barre and oracle (twin only: needs ``schedule=`` from :func:`flinktune.twin.oracle.oracle_schedule`).
The baselines live here (``grid`` is their parallelism grid); each is described, as published and as
it behaves in the replay, in ``docs/baselines.md``.
"""

from __future__ import annotations

from typing import Any

from flinktune.config_space import ConfigSpace
from flinktune.decision.stages import Policy
from flinktune.policies.autoscaler import AutoscalerPolicy
from flinktune.policies.barre import BarrePolicy
from flinktune.policies.demeter import DemeterPolicy
from flinktune.policies.ds2 import DS2Policy
from flinktune.policies.oracle_policy import OraclePolicy
from flinktune.policies.reactive import ReactivePolicy
from flinktune.policies.sage import SagePolicy
from flinktune.policies.static import StaticPolicy
from flinktune.tuner.flinktune_policy import FlinktunePolicy

__all__ = [
    "MODEL_POLICIES",
    "POLICY_NAMES",
    "AutoscalerPolicy",
    "BarrePolicy",
    "DS2Policy",
    "DemeterPolicy",
    "FlinktunePolicy",
    "OraclePolicy",
    "ReactivePolicy",
    "SagePolicy",
    "StaticPolicy",
    "make_policy",
]

_FACTORIES: dict[str, Any] = {
    "static": StaticPolicy,
    "demeter": DemeterPolicy,
    "flinktune": FlinktunePolicy,
    "reactive": ReactivePolicy,
    "ds2": DS2Policy,
    "autoscaler": AutoscalerPolicy,
    "sage": SagePolicy,
    "barre": BarrePolicy,
    "oracle": OraclePolicy,
}
POLICY_NAMES: tuple[str, ...] = tuple(_FACTORIES)
#: Policies that need a forecast and a surrogate (and may ask for profiling runs).
MODEL_POLICIES: frozenset[str] = frozenset({"demeter", "flinktune"})


def make_policy(name: str, space: ConfigSpace, *, confidence: float = 0.95, **options: Any) -> Policy:
    """The policy called ``name``; unknown names raise ``ValueError`` listing the known ones.

    ``options`` are passed to the policy's constructor (e.g. ``schedule=`` for the oracle,
    ``target_utilization=`` for reactive).
    """
    try:
        factory = _FACTORIES[name]
    except KeyError:
        raise ValueError(f"unknown policy {name!r}; known policies: {', '.join(POLICY_NAMES)}") from None
    if name in MODEL_POLICIES:
        return factory(space, confidence=confidence, **options)
    if name == "oracle" and "schedule" not in options:
        raise ValueError(
            "the oracle policy needs schedule= (flinktune.twin.oracle.oracle_schedule of the replayed trace); it exists on the twin only"
        )
    return factory(space, **options)
