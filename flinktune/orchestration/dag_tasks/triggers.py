"""What a DAG run may do, decided from how it was started: the conf it names, its run type, its asset events.

Use :func:`run_params` as the first line of every task body that reads ``params`` (the DAG files
do). Airflow merges a run's conf into its params without refusing unknown keys, gives a manual
run the same defaults as a scheduled one, and starts an asset-triggered run with the params'
defaults; so a typo (``{"tick": 3}``) was ignored, a mistyped manual trigger acted live, and a run
triggered by another job's new model acted on job ``demo``. The rules here:

- a conf key the DAG does not take fails the task before it acts, naming the closest valid key;
- ``dry_run`` left empty is true for a manual (or operator-triggered, backfill) run and false for
  the schedule (a time- or asset-triggered run): only runs nobody typed act by themselves;
- an asset-triggered run takes its job from the events that triggered it (their ``extra["job"]``,
  written by :func:`asset_extra`); events without one, or naming several jobs, fail the task.

Pure Python: no Airflow import (the test process never imports Airflow). ``dag_run`` is anything
with ``run_type``, ``conf`` and ``consumed_asset_events`` (each with an ``extra`` mapping), as
Airflow's task context gives it.
"""

from __future__ import annotations

import difflib
import logging
from collections.abc import Iterable, Mapping
from typing import Any

__all__ = ["ACTING_RUN_TYPES", "TriggerError", "asset_extra", "check_conf", "job_from_events", "resolve_dry_run", "run_params"]

log = logging.getLogger(__name__)

ACTING_RUN_TYPES = frozenset({"scheduled", "asset_triggered"})
"""Run types that apply changes when ``dry_run`` is left empty: the schedule's own runs."""


class TriggerError(ValueError):
    """A run's conf or trigger cannot be acted on; the message names the key, DAG or event at fault."""


def check_conf(dag_id: str, conf: Mapping[str, Any] | None, known: Iterable[str]) -> None:
    """Refuse conf keys the DAG does not take, naming the closest valid one."""
    known = sorted(known)
    unknown = sorted(set(conf or {}) - set(known))
    if not unknown:
        return
    hints = []
    for key in unknown:
        close = difflib.get_close_matches(key, known, n=1, cutoff=0.6)
        hints.append(f"{key!r} (did you mean {close[0]!r}?)" if close else repr(key))
    raise TriggerError(f"DAG {dag_id!r}: unknown conf key {', '.join(hints)}; it takes: {', '.join(known) or 'no keys'}")


def _run_type(dag_run: Any) -> str:
    value = getattr(dag_run, "run_type", "manual")
    return str(getattr(value, "value", value))


def resolve_dry_run(dry_run: bool | None, run_type: str) -> tuple[bool, str]:
    """``(dry_run, reason)``: an explicit value wins; empty means dry for anything but the schedule."""
    if dry_run is not None:
        return bool(dry_run), f"dry_run={bool(dry_run)} set by the run's conf or params"
    if run_type in ACTING_RUN_TYPES:
        return False, f"dry_run empty and the run is {run_type}: the schedule applies its decisions"
    return True, f"dry_run empty and the run is {run_type}: a run started by hand only records (set dry_run=false to act)"


def asset_extra(job: str) -> dict[str, str]:
    """The ``extra`` a task writes on its outlet asset events so that downstream runs know the job."""
    return {"job": job}


def job_from_events(dag_id: str, events: Iterable[Any]) -> str:
    """The one job named by the asset events that triggered a run of ``dag_id``."""
    events = list(events)
    jobs = {str(e.extra["job"]) for e in events if isinstance(getattr(e, "extra", None), Mapping) and e.extra.get("job")}
    if not events:
        raise TriggerError(f"DAG {dag_id!r}: the run is asset-triggered but carries no asset event to take its job from")
    if not jobs:
        raise TriggerError(
            f"DAG {dag_id!r}: the asset events that triggered this run name no job (extra['job']); "
            "refusing to act on the default job"
        )
    if len(jobs) > 1:
        raise TriggerError(
            f"DAG {dag_id!r}: the asset events that triggered this run name several jobs ({', '.join(sorted(jobs))}); "
            "trigger one run per job"
        )
    return jobs.pop()


def run_params(params: Mapping[str, Any], *, dag_id: str, known: Iterable[str], dag_run: Any) -> dict[str, Any]:
    """The params a task may act on: conf checked, job taken from asset events, ``dry_run`` resolved.

    ``known`` are the DAG's own param names. Adds ``dry_run_reason`` when the DAG has ``dry_run``.
    Raises :class:`TriggerError` (one line) before the task does anything.
    """
    known = list(known)
    check_conf(dag_id, getattr(dag_run, "conf", None), known)
    out = {k: params[k] for k in known if k in params}
    run_type = _run_type(dag_run)
    if run_type == "asset_triggered" and "job" in out:
        out["job"] = job_from_events(dag_id, getattr(dag_run, "consumed_asset_events", None) or [])
    if "dry_run" in out:
        out["dry_run"], out["dry_run_reason"] = resolve_dry_run(out["dry_run"], run_type)
        log.info("%s", out["dry_run_reason"])
    return out
