"""What a policy decides and the evaluated state it decides from.

A :class:`Decision` is one of keep, reconfigure (to one configuration) or profile (a batch of
short profiling runs), always with a ``reason`` a person can read and the ``inputs`` that led to
it (JSON-serialisable), so the state store can explain every change later.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from enum import Enum
from typing import TYPE_CHECKING, Any

import numpy as np

from flinktune.config_space import Configuration
from flinktune.redaction import redact

if TYPE_CHECKING:  # the analysis never imports this module at run time either way
    from flinktune.analysis.criticality import CriticalityAnalysis

__all__ = ["Action", "Decision", "JobState", "VertexMetrics"]


class Action(str, Enum):
    KEEP = "keep"
    RECONFIGURE = "reconfigure"
    PROFILE = "profile"


@dataclass(frozen=True)
class VertexMetrics:
    """One job vertex over the evaluation window (DS2 and the operator autoscaler read these).

    Rates are records/s summed over the vertex's subtasks and averaged over the seconds the job
    ran; ``busy_ratio`` and ``backpressure_ratio`` are fractions of a second (the busiest subtask,
    the autoscaler's MAX aggregator). ``true_processing_rate`` is DS2's records the vertex would
    process per second if it were never idle or backpressured: ``records_in_per_s / busy_ratio``
    (``inf`` when it received nothing).
    """

    name: str
    parallelism: int
    records_in_per_s: float
    records_out_per_s: float
    busy_ratio: float
    backpressure_ratio: float
    true_processing_rate: float

    @property
    def selectivity(self) -> float:
        """Records out per record in (1.0 when nothing came in)."""
        return self.records_out_per_s / self.records_in_per_s if self.records_in_per_s > 0 else 1.0

    def to_dict(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in self.__dataclass_fields__}


@dataclass(frozen=True)
class JobState:
    """The evaluated state of one job at decision time (the output of collect + evaluate).

    Rates are records/s, latencies ms, ``lag`` records. ``window_s`` is how much history the
    summary covers; ``fresh`` is False when the newest sample is older than allowed.
    """

    job: str
    ts: float
    config: Configuration
    running: bool
    input_rate: float
    throughput: float
    lag: float
    lag_growth: float
    latency_p95_ms: float
    cpu_used: float
    memory_used_mb: float
    busy_ratio: float
    backpressure_ratio: float
    window_s: int
    fresh: bool = True
    problems: tuple[str, ...] = ()
    #: Per-vertex metrics in topological order (source first); empty when the source has none.
    vertices: tuple[VertexMetrics, ...] = ()
    #: Job restarts (failures) within the window: the increase of Flink's ``numRestarts`` counter.
    restarts: int = 0
    #: Where the window's time went (bottleneck, stragglers, hot channel); None without per-vertex busy time.
    analysis: CriticalityAnalysis | None = None
    #: Each minute of the window as (minute start, s; 95th percentile of its per-second p95 latency, ms),
    #: ``inf`` for a minute the job was down: what an error budget of minutes over target counts.
    minute_p95: tuple[tuple[float, float], ...] = ()
    #: Seconds from the newest sample the decision used to the decision (NaN without any sample).
    data_age_s: float = float("nan")

    def __post_init__(self) -> None:
        # Problems quote errors from outside (a model store's URI): stored with the decision, never a credential.
        object.__setattr__(self, "problems", tuple(redact(p) for p in self.problems))

    def vertex(self, name: str) -> VertexMetrics:
        """The metrics of vertex ``name``; KeyError lists the known vertices."""
        for v in self.vertices:
            if v.name == name:
                return v
        raise KeyError(f"job {self.job!r} has no metrics for vertex {name!r}; known: {[v.name for v in self.vertices]}")

    def to_dict(self) -> dict[str, Any]:
        d = {k: getattr(self, k) for k in self.__dataclass_fields__ if k not in ("config", "vertices", "analysis")}
        d["config"] = self.config.to_dict()
        d["problems"] = list(self.problems)
        d["minute_p95"] = [[t, v if np.isfinite(v) else None] for t, v in self.minute_p95]
        d["vertices"] = [v.to_dict() for v in self.vertices]
        if self.analysis is not None:
            d["analysis"] = self.analysis.to_dict()
        return d


@dataclass(frozen=True)
class Decision:
    """A policy's choice with its reason.

    ``target`` is set for reconfigure, ``profile_configs`` for profile. ``inputs`` holds what the
    policy looked at (planned rate, predicted latency, probabilities) for the audit trail.
    """

    action: Action
    reason: str
    policy: str
    target: Configuration | None = None
    profile_configs: tuple[Configuration, ...] = ()
    inputs: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.reason.strip():
            raise ValueError("a decision needs a reason a person can read")
        # A reason may quote an error from a client library (a tracking URI with its password):
        # it is stored and shown to every viewer, so it never carries a credential.
        object.__setattr__(self, "reason", redact(self.reason))
        if self.action is Action.RECONFIGURE and self.target is None:
            raise ValueError("a reconfigure decision needs a target configuration")
        if self.action is Action.PROFILE and not self.profile_configs:
            raise ValueError("a profile decision needs at least one profiling configuration")

    @classmethod
    def keep(cls, policy: str, reason: str, **inputs: Any) -> Decision:
        return cls(Action.KEEP, reason, policy, inputs=dict(inputs))

    def to_dict(self) -> dict[str, Any]:
        return {
            "action": self.action.value,
            "reason": self.reason,
            "policy": self.policy,
            "target": self.target.to_dict() if self.target else None,
            "profile_configs": [c.to_dict() for c in self.profile_configs],
            "inputs": self.inputs,
        }

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), sort_keys=True, default=float)
