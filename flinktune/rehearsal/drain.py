"""The end of a rehearsal: let the ``flinktune_decide`` and ``flinktune_ingest`` runs in flight finish,
start no new one.

Use :func:`drain_decide` once the rate plan is over, then :func:`drain_ingest`. The decide DAG is
paused at once and drained when none of its tasks is queued or running: a change being applied is
settled (applied, failed or rolled back) before the stack stops, never cut off half-way. For the
ingest DAG, pausing is not enough on its own: a paused DAG's scheduled task instances are never
queued (Airflow 3's scheduler skips paused DAGs there), so a pause that lands between a run's
``collect`` and its ``etl_features`` leaves the collected raw metrics without their ETL for ever,
and a run queued behind ``max_active_runs`` never starts. So the drain keeps the DAG unpaused
exactly while some run has collected but not yet curated (its ETL must be scheduled), paused
otherwise, and ends when, paused, no task instance is queued or running and no run is caught
half-way. Runs that never collected (queued, or stopped after their ``fleet`` task) wrote nothing
and are left as they are.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

if TYPE_CHECKING:
    from flinktune.rehearsal.stack import Topology

__all__ = ["DrainState", "drain_decide", "drain_ingest", "drain_state"]

_IN_MOTION = frozenset({"queued", "running", "restarting"})  # the executor has them: they end paused or not
_FINAL = frozenset({"success", "failed", "skipped", "upstream_failed", "removed"})


@dataclass(frozen=True)
class DrainState:
    """One look at the ingest DAG's active runs: ``half_done`` names the runs whose ``collect`` wrote raw metrics
    while an ``etl_features`` has not ended; ``in_motion`` counts task instances queued or running."""

    half_done: tuple[str, ...]
    in_motion: int

    @property
    def drained(self) -> bool:
        """True when nothing runs and nothing collected waits for its ETL (given the DAG is paused)."""
        return not self.half_done and self.in_motion == 0


def drain_state(task_instances: Mapping[str, Iterable[Mapping[str, Any]]]) -> DrainState:
    """Judge the active runs from their task instances (run id -> the API's task-instance dicts: ``task_id``,
    ``state``; an unmapped ``etl_features`` not yet expanded has state None and counts as not ended)."""
    half_done, in_motion = [], 0
    for run_id, tis in task_instances.items():
        tis = list(tis)
        in_motion += sum(ti.get("state") in _IN_MOTION for ti in tis)
        collected = any(ti["task_id"] == "collect" and ti.get("state") == "success" for ti in tis)
        etl_open = any(ti["task_id"] == "etl_features" and ti.get("state") not in _FINAL for ti in tis)
        if collected and etl_open:
            half_done.append(run_id)
    return DrainState(tuple(half_done), in_motion)


def _look(api: Any, base: str) -> DrainState | None:
    """The active runs' task instances, or None when the API did not answer."""
    runs = api.get(f"{base}/dagRuns", params=[("state", "queued"), ("state", "running"), ("limit", 100)], timeout=30)
    if not runs.ok:
        return None
    tis: dict[str, list[dict[str, Any]]] = {}
    for run in runs.json().get("dag_runs", []):
        run_id = run["dag_run_id"]
        got = api.get(f"{base}/dagRuns/{quote(run_id, safe='')}/taskInstances", params=[("limit", 1000)], timeout=30)
        if not got.ok:
            return None
        tis[run_id] = got.json().get("task_instances", [])
    return drain_state(tis)


def drain_ingest(topo: Topology, timeout_s: float, check: Callable[[], None], *, poll_s: float = 1.0) -> bool:
    """Stop ``flinktune_ingest`` from starting runs and let the one in flight end (module docstring); True once
    drained, False when ``timeout_s`` passed first or the API refused the pause. ``check`` is called between
    looks (the stack's health check: it raises when a server died). The DAG is left paused."""
    return _drain(topo, "flinktune_ingest", timeout_s, check, poll_s)


def drain_decide(topo: Topology, timeout_s: float, check: Callable[[], None], *, poll_s: float = 1.0) -> bool:
    """Pause ``flinktune_decide`` and let its tasks in flight end, so each decision being carried out is settled;
    True once none is queued or running, False as :func:`drain_ingest`. The DAG is left paused."""
    return _drain(topo, "flinktune_decide", timeout_s, check, poll_s)


def _drain(topo: Topology, dag_id: str, timeout_s: float, check: Callable[[], None], poll_s: float) -> bool:
    # A DAG without collect and etl_features tasks never has a run half-done: it is paused at the first look.
    api = topo.session()
    base = f"{topo.api}/api/v2/dags/{dag_id}"
    paused: bool | None = None
    deadline = time.monotonic() + timeout_s
    while True:
        state = _look(api, base)
        want_paused = state is None or not state.half_done
        if want_paused != paused:
            if not api.patch(base, json={"is_paused": want_paused}, timeout=30).ok:
                return False
            paused = want_paused  # and look again before judging: a run may have moved meanwhile
        elif paused and state is not None and state.drained:
            return True
        if time.monotonic() > deadline:
            if not paused:
                api.patch(base, json={"is_paused": True}, timeout=30)
            return False
        check()
        time.sleep(poll_s)
