"""DS2 (Kalavri et al., OSDI 2018): per-vertex parallelism from true processing rates.

Use :class:`DS2Policy` (``make_policy("ds2", space)``) as the DS2 baseline: every vertex gets
``ceil(target input rate / true rate per instance)`` instances for the current input rate, the target
rates propagated down the dataflow by the observed selectivities; the job's parallelism is the grid
value at or above the largest need and the vertices needing less get
``pipeline.jobvertex-parallelism-overrides`` (``per_vertex=True``). Only parallelism changes. The
published method and why it behaves as it does in the replay are in ``docs/baselines.md`` (ds2).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from flinktune.config_space import ConfigSpace
from flinktune.decision import Action, Decision, JobState
from flinktune.decision.stages import PolicyContext
from flinktune.policies.grid import ceil_div, snap_parallelism, vertex_targets

__all__ = ["DS2Policy", "ds2_parallelism"]


def ds2_parallelism(state: JobState, source_rate: float) -> dict[str, int]:
    """DS2's optimal instances per vertex for the sources to read ``source_rate`` rec/s."""
    targets = vertex_targets(state.vertices, source_rate)
    out: dict[str, int] = {}
    for v, target in zip(state.vertices, targets):
        if not np.isfinite(v.true_processing_rate) or v.true_processing_rate <= 0:
            out[v.name] = 1  # it received nothing: one instance is enough
            continue
        out[v.name] = ceil_div(target, v.true_processing_rate / v.parallelism)
    return out


@dataclass
class DS2Policy:
    """DS2 on the configuration space; ``per_vertex`` adds overrides for vertices needing less."""

    space: ConfigSpace
    per_vertex: bool = True
    name: str = "ds2"

    def decide(self, state: JobState, context: PolicyContext) -> Decision:
        if not state.vertices:
            return Decision.keep(
                self.name, "hold: no per-vertex metrics (records in/out, busy time) to compute true processing rates from"
            )
        rate = state.input_rate
        need = ds2_parallelism(state, rate)
        cur = state.config
        job_p = snap_parallelism(self.space, max(need.values()), cur.task_slots)
        overrides = {v: p for v, p in need.items() if p < job_p} if self.per_vertex else {}
        target = cur.with_(parallelism=job_p, vertex_parallelism=overrides)
        inputs = {
            "planned_rate": rate,
            "vertex_need": need,
            "true_rates": {v.name: v.true_processing_rate for v in state.vertices},
        }
        sizes = ", ".join(f"{v}={p}" for v, p in need.items())
        if target == cur:
            return Decision.keep(self.name, f"DS2 sizes at {rate:,.0f} rec/s ({sizes}) match the running parallelism", **inputs)
        return Decision(
            Action.RECONFIGURE,
            f"DS2: true processing rates give {sizes} instances for {rate:,.0f} rec/s; job parallelism "
            f"{cur.parallelism} -> {job_p}" + (f" with overrides {overrides}" if overrides else ""),
            self.name,
            target=target,
            inputs=inputs,
        )
