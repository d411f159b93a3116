"""Fresh metrics for a decision: the lake's history with the minutes it does not hold yet read live.

Use :class:`FreshMetricsSource` as a decision loop's :class:`~flinktune.decision.stages.MetricsSource`
where the lake is filled by a scheduled ingest that lags behind the job (extract, then a Spark ETL
per run). Each ``fetch`` reads the window from the lake, then asks a :class:`RecentMetrics` (the
real one queries Prometheus with the ingest's own queries: :mod:`flinktune.extract.recent`) for
the part of the window after the lake's newest sample, checks those rows as the ingest's rows are
checked (the raw schema, then the ``raw_metrics`` data contract: its GX suite, at the injected
clock's time), and returns the two merged. When the recent source cannot be reached, returns no
rows, or its rows fail a check, the decision is made on the lake alone and :attr:`~FreshMetricsSource.note`
says so with the age of the lake's newest sample; the loop appends that note to the decision's
reason (:class:`~flinktune.decision.stages.SourceNote`). The age the decision records
(``JobState.data_age_s``) is that of the newest sample of the merged view.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Protocol

import pandas as pd

from flinktune.clock import Clock
from flinktune.decision.stages import MetricsSource
from flinktune.metrics.schema import SchemaError, validate_frame

__all__ = ["FreshMetricsSource", "RecentMetrics", "RecentMetricsUnavailable"]

log = logging.getLogger(__name__)

#: The data contract the recent rows must pass: the one every raw batch of the lake passes before its ETL.
CONTRACT = "raw_metrics"
_ROW_ORDER = ["ts_ms", "metric", "vertex", "subtask"]  # flinktune.extract.sink.RawSink writes each file so


class RecentMetricsUnavailable(RuntimeError):
    """The recent source cannot serve now (unreachable, refused, no endpoint); the message says why in one line."""


class RecentMetrics(Protocol):
    """The last minutes of a job's samples straight from the metrics source, raw schema.

    ``name`` says where they come from in a reason (``Prometheus http://host:9090``); ``recent``
    raises :class:`RecentMetricsUnavailable` when the source cannot answer."""

    @property
    def name(self) -> str: ...

    def recent(self, job: str, start_ms: int, end_ms: int) -> pd.DataFrame: ...


@dataclass
class FreshMetricsSource:
    """``history`` (the lake) merged with ``recent`` after the lake's newest sample; see the module docstring.

    ``recent`` None reads the lake alone without a note (no live source is configured). ``note``
    is what the last :meth:`fetch` leaves for the decision's reason (None when it had nothing to
    say); ``served`` how many rows each side gave it."""

    history: MetricsSource
    recent: RecentMetrics | None
    clock: Clock
    note: str | None = field(default=None, init=False)
    served: dict[str, int] = field(default_factory=dict, init=False)

    def fetch(self, job: str, start_ms: int, end_ms: int) -> pd.DataFrame:
        lake = self.history.fetch(job, start_ms, end_ms)
        self.note, self.served = None, {"lake": len(lake), "recent": 0}
        if self.recent is None:
            return lake
        now = self.clock.now()
        newest = int(lake["ts_ms"].max()) if len(lake) else None
        lo = start_ms if newest is None else max(start_ms, newest + 1)
        hi = min(end_ms, int(now * 1000) + 1)
        if hi <= lo:  # the lake holds the whole window already
            return lake
        try:
            rows = self.recent.recent(job, lo, hi)
        except RecentMetricsUnavailable as exc:
            return self._lake_alone(lake, now, f"{self.recent.name} unreachable ({exc})")
        problem = self._problem(rows, job, lo, hi, now)
        if problem:
            return self._lake_alone(lake, now, problem)
        self.served["recent"] = len(rows)
        merged = pd.concat([lake, validate_frame(rows)], ignore_index=True) if len(lake) else validate_frame(rows)
        # In the lake's own row order (its writer's), so vertices come in the order a lake-only view lists them.
        return merged.sort_values(_ROW_ORDER, kind="stable").reset_index(drop=True)

    def _problem(self, rows: pd.DataFrame, job: str, lo: int, hi: int, now: float) -> str | None:
        """Why the recent rows cannot join the decision's view (None when they can): the checks the ingest's
        rows go through before they reach the features."""
        assert self.recent is not None
        name, span = self.recent.name, f"[{lo}, {hi})"
        try:
            rows = validate_frame(rows, where=f"{name} rows of job {job!r} in {span}")
        except SchemaError as exc:
            return str(exc)
        if rows.empty:
            return f"{name} has no samples of job {job!r} after the lake's newest ({span})"
        outside = rows[(rows["job"] != job) | (rows["ts_ms"] < lo) | (rows["ts_ms"] >= hi)]
        if len(outside):
            return f"{name} returned {len(outside)} rows outside job {job!r} and {span}"
        from data_contracts.contract import load_contract
        from data_contracts.validate import run_checks

        outcome = run_checks(rows, load_contract(CONTRACT), batch_id=f"recent-{job}-{lo}", now=now)
        if not outcome.passed:
            return f"{name} rows of job {job!r} in {span} fail the {CONTRACT} contract: " + "; ".join(
                f.describe() for f in outcome.errors
            )
        for warning in outcome.warnings:
            log.warning("recent metrics of %s: %s", job, warning.describe())
        return None

    def _lake_alone(self, lake: pd.DataFrame, now: float, why: str) -> pd.DataFrame:
        age = f"newest sample {now - float(lake['ts_ms'].max()) / 1000.0:.0f} s old" if len(lake) else "no sample in the window"
        self.note = f"{why}: decided on the lake alone, {age}"
        log.warning("%s", self.note)
        return lake
