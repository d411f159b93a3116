"""Static policy: run the maximum configuration always (the reference of every report)."""

from __future__ import annotations

from dataclasses import dataclass

from flinktune.config_space import ConfigSpace
from flinktune.decision import Action, Decision, JobState
from flinktune.decision.stages import PolicyContext

__all__ = ["StaticPolicy"]


@dataclass
class StaticPolicy:
    """Keeps ``space.maximum`` (24 x (1 CPU, 4 GiB) by default); moves there once if elsewhere."""

    space: ConfigSpace
    name: str = "static"

    def decide(self, state: JobState, context: PolicyContext) -> Decision:
        mx = self.space.maximum
        if state.config == mx:
            return Decision.keep(self.name, f"static policy: {mx.describe()} is in force and never changes")
        return Decision(Action.RECONFIGURE, f"static policy: move to the fixed maximum {mx.describe()}", self.name, target=mx)
