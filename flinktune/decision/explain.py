"""Sentences from a bottleneck analysis, and the decision annotation the loop applies.

Use :func:`explain` for the text every decision's reason ends with (the bottleneck, its share of
the critical path, stragglers, the hot channel and whether scaling can help), and
:func:`annotate` in the decision loop after the guard: it appends that text to the reason and
puts the analysis in the decision's inputs, and changes nothing else. Holding a scale-up against
a hot key is the guard's rule (``flinktune.decision.guard``), so that the guard has the last word.
"""

from __future__ import annotations

from dataclasses import replace

from flinktune.analysis.criticality import CriticalityAnalysis
from flinktune.decision.decision import Decision, JobState

__all__ = ["annotate", "explain"]


def explain(analysis: CriticalityAnalysis | None) -> str:
    """One line: bottleneck and its share, the top straggler and slow worker, and the scaling verdict."""
    if analysis is None:
        return "bottleneck: unknown (no per-vertex busy time in the window)"
    a = analysis
    parts = [
        f"bottleneck: {a.bottleneck} ({a.operators[a.bottleneck]:.0%} of the critical path, busiest subtask {a.bottleneck_busy:.0%} busy"
        + (", saturated)" if a.saturated else ")")
    ]
    if a.stragglers:
        s = a.stragglers[0]
        parts.append(
            f"straggler {s.label()} ({s.cause}: {s.busy_ratio:.1f}x its siblings' busy time, {s.records_ratio:.1f}x records, "
            f"{s.cost_ratio:.1f}x time per record)"
        )
    if a.slow_workers:
        parts.append(f"slow TaskManager(s) {list(a.slow_workers)}")
    if a.hot_channel and a.edge_basis == "backpressure":
        parts.append(f"hot channel {a.hot_channel[0]}->{a.hot_channel[1]} ({a.edges[a.hot_channel]:.0%} of backpressure)")
    parts.append(f"scaling helps: {a.scaling} ({a.scaling_why})")
    return "; ".join(parts)


def annotate(decision: Decision, state: JobState) -> Decision:
    """``decision`` with the window's analysis quoted in its reason and inputs; same action and target."""
    a = state.analysis
    inputs = dict(decision.inputs)
    inputs["bottleneck"] = a.to_dict() if a is not None else None
    return replace(decision, reason=f"{decision.reason} | {explain(a)}", inputs=inputs)
