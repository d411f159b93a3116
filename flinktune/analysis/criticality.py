"""Where the time goes: critical participation per operator, subtask, edge and worker.

Use :func:`analyse` on the raw samples of one evaluation window (the evaluation stage does, and
puts the result on ``JobState.analysis``); :func:`flinktune.decision.explain.explain` turns it
into the sentence every decision quotes.

The approximation (SnailTrail's critical participation, adapted to what Flink exposes). Flink
reports, per subtask and second, busy time (processing, neither waiting for input nor blocked on
output), backpressured time and idle time, plus record rates; it does not report the events a
program activity graph needs. So, for every second of the window:

1. a subtask's *unblocked work* is its busy fraction (waiting, in either direction, is never on
   the critical path: an idle subtask waits for its input, a backpressured one for its output);
2. the *longest chain of unblocked work* runs through one subtask per vertex; vertices joined by
   a shuffle (hash, rebalance) connect every subtask to every subtask, so the chain takes the
   busiest subtask of each vertex; vertices joined by forward channels (``forward_edges``) keep
   the lane, so the chain takes the lane with the most work over the forward-joined group. Ties
   (within ``tie_tolerance`` of a second) share the second evenly;
3. each subtask on the chain is credited with its unblocked work in that second.

Credits summed over the window and divided by their total give the subtask scores (sum 1);
operator scores sum their subtasks, worker scores the subtasks placed on each TaskManager
(``j // task_slots``). Edge scores credit the channel u -> v with the time u's subtasks were
backpressured while v's were not (the sender blocked on that channel, the receiver is the
cause); in a window without backpressure they fall back to each channel's share of records sent
(a chatty channel). Both sum to 1.

Limits: busy time is sampled by Flink (the twin adds noise to mimic it); a chain of pipelined
stages overlaps in time, so a score is a share of critical work, not of wall-clock time; a
linear chain of vertices is assumed (a DAG's branches are treated as a chain in the order the
vertices are listed); the subtask -> TaskManager placement is slot sharing's default layout;
with vertex-level samples only, subtask, worker and straggler results are empty.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from flinktune.analysis.stragglers import KEY_SKEW, SLOW_WORKER, Straggler, find_stragglers, slow_workers
from flinktune.analysis.windows import SubtaskWindow, VertexWindow, subtask_window

__all__ = ["SCALING_VERDICTS", "CriticalityAnalysis", "analyse", "scores_from_window"]

#: Whether more parallelism can help: yes, no (key skew), partly (a slow worker), not needed.
SCALING_VERDICTS = ("yes", "no", "partly", "not needed")
# A bottleneck is saturated when its busiest subtask is busy this much, or upstream is backpressured.
_SATURATED_BUSY, _SATURATED_BP = 0.85, 0.1


@dataclass(frozen=True)
class CriticalityAnalysis:
    """Critical participation of one window; every score mapping sums to 1 (empty when unknown).

    ``subtasks`` keys are ``(vertex, subtask)``; ``edges`` keys ``(upstream, downstream)``;
    ``workers`` keys TaskManager indices. ``scaling`` is one of :data:`SCALING_VERDICTS` with
    ``scaling_why`` the reason in words.
    """

    seconds: int
    operators: dict[str, float]
    subtasks: dict[tuple[str, int], float]
    edges: dict[tuple[str, str], float]
    workers: dict[int, float]
    edge_basis: str
    bottleneck: str
    bottleneck_busy: float
    saturated: bool
    stragglers: tuple[Straggler, ...] = ()
    slow_workers: tuple[int, ...] = ()
    hot_channel: tuple[str, str] | None = None
    per_subtask: bool = False
    scaling: str = "yes"
    scaling_why: str = ""
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def top_subtask(self) -> tuple[str, int] | None:
        return max(self.subtasks, key=self.subtasks.__getitem__) if self.subtasks else None

    @property
    def prefers_no_change(self) -> bool:
        """True when more parallelism would not help (the bottleneck is a hot key)."""
        return self.scaling == "no"

    def to_dict(self) -> dict[str, Any]:
        """JSON-friendly form (tuple keys joined as ``vertex[j]`` and ``u->v``)."""
        return {
            "seconds": self.seconds,
            "bottleneck": self.bottleneck,
            "bottleneck_busy": self.bottleneck_busy,
            "saturated": self.saturated,
            "scaling": self.scaling,
            "scaling_why": self.scaling_why,
            "operators": dict(self.operators),
            "subtasks": {f"{v}[{j}]": s for (v, j), s in self.subtasks.items()},
            "edges": {f"{u}->{v}": s for (u, v), s in self.edges.items()},
            "edge_basis": self.edge_basis,
            "workers": {str(w): s for w, s in self.workers.items()},
            "slow_workers": list(self.slow_workers),
            "stragglers": [s.to_dict() for s in self.stragglers],
            "hot_channel": "->".join(self.hot_channel) if self.hot_channel else None,
            "per_subtask": self.per_subtask,
        }


def _groups(vertices: tuple[VertexWindow, ...], forward: set[tuple[str, str]]) -> list[list[int]]:
    # Consecutive vertices joined by a forward channel (same parallelism) share lanes.
    groups: list[list[int]] = [[0]]
    for k in range(1, len(vertices)):
        u, v = vertices[k - 1], vertices[k]
        if (u.name, v.name) in forward and u.subtasks == v.subtasks:
            groups[-1].append(k)
        else:
            groups.append([k])
    return groups


def _on_chain(work: np.ndarray, tol: float) -> np.ndarray:
    """Per second, the even split of the chain's credit over the lanes within ``tol`` of the best."""
    best = work.max(axis=1, keepdims=True)
    chosen = (work >= best - tol) & (best > 0)
    n = np.maximum(chosen.sum(axis=1, keepdims=True), 1)
    return chosen / n


def scores_from_window(
    window: SubtaskWindow, *, forward_edges: Collection[tuple[str, str]] = (), tie_tolerance: float = 0.02
) -> tuple[dict[tuple[str, int], float], dict[tuple[str, str], float], str]:
    """(subtask scores, edge scores, edge basis) of a window; subtask scores empty when nothing was busy."""
    vs = window.vertices
    credit: dict[tuple[str, int], float] = {}
    for group in _groups(vs, set(forward_edges)):
        lane_work = np.sum([vs[k].busy for k in group], axis=0)
        share = _on_chain(lane_work, tie_tolerance * len(group))
        for k in group:
            c = (vs[k].busy * share).sum(axis=0)
            credit.update({(vs[k].name, j): float(x) for j, x in zip(vs[k].subtasks, c)})
    total = sum(credit.values())
    subtasks = {key: x / total for key, x in credit.items()} if total > 0 else {}
    edges: dict[tuple[str, str], float] = {}
    basis = "backpressure"
    for u, v in zip(vs[:-1], vs[1:]):
        edges[(u.name, v.name)] = float((u.backpressured.mean(axis=1) * (1.0 - v.backpressured.mean(axis=1))).sum())
    if sum(edges.values()) <= 0:
        basis = "traffic"
        edges = {(u.name, v.name): float(u.records_out.sum()) for u, v in zip(vs[:-1], vs[1:])}
    etotal = sum(edges.values())
    edges = {k: x / etotal for k, x in edges.items()} if etotal > 0 else {}
    return subtasks, edges, basis


def _verdict(
    bottleneck: str, busy: float, saturated: bool, stragglers: tuple[Straggler, ...], slow: tuple[int, ...]
) -> tuple[str, str]:
    skew = [s for s in stragglers if s.cause == KEY_SKEW and s.vertex == bottleneck]
    if skew:
        s = skew[0]
        return "no", (
            f"key skew on {s.label()}: it gets {s.records_ratio:.1f}x its siblings' records; more parallelism leaves "
            f"the hot key on one subtask, so prefer no change (salt or pre-aggregate the key)"
        )
    if slow:
        w = slow[0]
        cost = [s.cost_ratio for s in stragglers if s.cause == SLOW_WORKER and s.worker == w]
        how = f" ({max(cost):.1f}x its siblings' time per record)" if cost else ""
        return "partly", f"TaskManager {w} is slow{how}; replacing it helps more than scaling, which only spreads work around it"
    if saturated:
        return "yes", f"{bottleneck} is saturated (busiest subtask {busy:.0%} busy): more parallelism for it can help"
    return "not needed", f"no operator is saturated ({bottleneck} busiest at {busy:.0%})"


def analyse(
    samples: pd.DataFrame,
    *,
    task_slots: int | None = None,
    forward_edges: Collection[tuple[str, str]] = (),
    tie_tolerance: float = 0.02,
    straggler_ratio: float = 1.5,
    cause_ratio: float = 1.3,
) -> CriticalityAnalysis | None:
    """Critical participation of the window in ``samples`` (raw schema); None when nothing was busy.

    ``task_slots`` places subtask ``j`` on TaskManager ``j // task_slots`` (worker scores and
    slow workers need it); ``forward_edges`` lists (upstream, downstream) vertex pairs joined by
    forward channels (default: every edge shuffles).
    """
    window = subtask_window(samples)
    if window is None or window.seconds == 0:
        return None
    subtasks, edges, basis = scores_from_window(window, forward_edges=forward_edges, tie_tolerance=tie_tolerance)
    if not subtasks:
        return None
    operators: dict[str, float] = {}
    for (v, _j), s in subtasks.items():
        operators[v] = operators.get(v, 0.0) + s
    workers: dict[int, float] = {}
    if window.per_subtask and task_slots:
        for (_v, j), s in subtasks.items():
            workers[j // task_slots] = workers.get(j // task_slots, 0.0) + s
    bottleneck = max(operators, key=operators.__getitem__)
    k = [v.name for v in window.vertices].index(bottleneck)
    busy = float(window.vertices[k].busy.mean(axis=0).max())
    upstream_bp = max((float(v.backpressured.mean()) for v in window.vertices[:k]), default=0.0)
    saturated = busy >= _SATURATED_BUSY or upstream_bp >= _SATURATED_BP
    stragglers = find_stragglers(window, subtasks, task_slots=task_slots, busy_ratio=straggler_ratio, cause_ratio=cause_ratio)
    slow = slow_workers(window, workers, task_slots=task_slots, cause_ratio=cause_ratio)
    scaling, why = _verdict(bottleneck, busy, saturated, stragglers, slow)
    hot = max(edges, key=edges.__getitem__) if edges else None
    return CriticalityAnalysis(
        window.seconds,
        operators,
        subtasks,
        edges,
        workers,
        basis,
        bottleneck,
        busy,
        saturated,
        stragglers,
        slow,
        hot,
        window.per_subtask,
        scaling,
        why,
    )
