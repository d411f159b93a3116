"""DS2 (Kalavri et al., OSDI 2018): per-vertex parallelism from true processing rates.

Facts carried over (DESIGN.md section 1, ANCHORS.md): a vertex's *true* processing rate is the
records it processes per second of useful (busy) time, so it does not depend on how much the
vertex waits for input or on backpressure. Given the rate the sources must sustain, every vertex
gets ``ceil(target input rate / true rate per instance)`` instances, with the target input rates
propagated down the dataflow by the observed selectivities. One evaluation sizes the whole
dataflow at once, which is why DS2 converges in one to three steps; it only ever changes
parallelism (the other knobs stay as they are).

In this product: the job parallelism (it sets the TaskManagers) is the grid value at or above
the largest vertex need, and the vertices needing less get ``pipeline.jobvertex-parallelism-
overrides`` (``per_vertex=True``, the published per-operator form). DS2 keeps the configuration
when the new sizes equal the current ones, which is its own hysteresis.
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
