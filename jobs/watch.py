"""The watch task: does a job on a real cluster need a decision now, before its next interval?

Run by ``flinktune_watch`` every minute for each watched fleet job (:data:`flinktune.decision.watch.WATCHED_POLICIES`):
it reads the last two minutes of the raw lake and what the cluster runs, applies
:func:`flinktune.decision.watch.check` and returns the alarm's reason, which the DAG passes to a
``flinktune_decide`` run for that job (its decision says it came early, and why). It changes
nothing itself. On the twin (``FLINKTUNE_CLUSTER=twin``) the decide run watches between its own
ticks, so this returns no alarm and says so.

``python -m jobs.watch --job demo`` prints a JSON summary.
"""

from __future__ import annotations

import json

from flinktune.decision.store import open_state_store
from flinktune.decision.watch import check_cluster
from flinktune.entry import OneLineParser, run_main
from flinktune.job_name import job_name
from flinktune.settings import Settings, load_settings

__all__ = ["main", "run"]


def run(*, job: str, settings: Settings | None = None) -> dict:
    """``{"job", "ts", "alarm"}``: ``alarm`` is the reason to decide now, or None (``note`` says why on the twin)."""
    job = job_name(job)
    settings = settings or load_settings()
    from flinktune.backends.choice import load_backends

    cluster = load_backends().cluster
    if cluster == "twin":
        return {"job": job, "ts": None, "alarm": None, "note": "on the twin the decide run watches between its own ticks"}
    from flinktune.runs.decide_cluster import cluster_backend

    backend, _ = cluster_backend(job, settings, cluster, dry_run=True)  # the watch reads only
    now = backend.clock.now()
    alarm = check_cluster(
        job, backend.realizer, backend.source, open_state_store(settings), now, latency_target_ms=settings.latency_target_ms
    )
    return {"job": job, "ts": now, "alarm": alarm.reason if alarm is not None else None}


def main(argv: list[str] | None = None) -> int:
    """``python -m jobs.watch``: one line and exit code 2 on a known error (see :mod:`flinktune.entry`)."""
    return run_main("python -m jobs.watch", _main, argv)


def _main(argv: list[str]) -> None:
    p = OneLineParser(prog="python -m jobs.watch", description=__doc__)
    p.add_argument("--job", required=True)
    a = p.parse_args(argv)
    print(json.dumps(run(job=a.job)))


if __name__ == "__main__":
    raise SystemExit(main())
