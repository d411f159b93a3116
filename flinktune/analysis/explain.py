"""Sentences from a bottleneck analysis, and the decision annotation the loop applies.

Use :func:`explain` for the text every decision's reason ends with (the bottleneck, its share of
the critical path, stragglers, the hot channel and whether scaling can help), and
:func:`annotate` in the decision loop after the guard: it appends that text to the reason, puts
the analysis in the decision's inputs, and turns a scale-up into keep when the bottleneck is a
hot key (more parallelism does not remove skew: prefer no change).
"""

from __future__ import annotations

from dataclasses import replace

from flinktune.analysis.criticality import CriticalityAnalysis
from flinktune.decision import Action, Decision, JobState

__all__ = ["explain", "annotate"]


def explain(analysis: CriticalityAnalysis | None) -> str:
    """One line: bottleneck and its share, the top straggler and slow worker, and the scaling verdict."""
    if analysis is None:
        return "bottleneck: unknown (no per-vertex busy time in the window)"
    a = analysis
    parts = [f"bottleneck: {a.bottleneck} ({a.operators[a.bottleneck]:.0%} of the critical path, busiest subtask {a.bottleneck_busy:.0%} busy"
             + (", saturated)" if a.saturated else ")")]  # fmt: skip
    if a.stragglers:
        s = a.stragglers[0]
        parts.append(f"straggler {s.label()} ({s.cause}: {s.busy_ratio:.1f}x its siblings' busy time, {s.records_ratio:.1f}x records, "
                     f"{s.cost_ratio:.1f}x time per record)")  # fmt: skip
    if a.slow_workers:
        parts.append(f"slow TaskManager(s) {list(a.slow_workers)}")
    if a.hot_channel and a.edge_basis == "backpressure":
        parts.append(f"hot channel {a.hot_channel[0]}->{a.hot_channel[1]} ({a.edges[a.hot_channel]:.0%} of backpressure)")
    parts.append(f"scaling helps: {a.scaling} ({a.scaling_why})")
    return "; ".join(parts)


def _scales_up(decision: Decision, state: JobState) -> bool:
    t, c = decision.target, state.config
    if decision.action is not Action.RECONFIGURE or t is None:
        return False
    more = t.parallelism > c.parallelism or any(p > c.vertex_overrides().get(v, c.parallelism) for v, p in t.vertex_overrides().items())
    return more


def annotate(decision: Decision, state: JobState) -> Decision:
    """``decision`` with the analysis quoted; a scale-up against key skew becomes keep (prefer no change)."""
    a = state.analysis
    inputs = dict(decision.inputs)
    inputs["bottleneck"] = a.to_dict() if a is not None else None
    text = explain(a)
    if a is not None and a.prefers_no_change and _scales_up(decision, state):
        return Decision.keep(decision.policy, f"held {decision.action.value} to {decision.target.describe()}: {text}",  # type: ignore[union-attr]
                             **inputs, held_target=decision.target.to_dict())  # type: ignore[union-attr]  # fmt: skip
    return replace(decision, reason=f"{decision.reason} | {text}", inputs=inputs)
