"""Durable state of the tuner: decisions with their inputs, reasons and outcomes, forecasts, and
the policy's memory.

SQLite by default (``settings.state_db``); every write is one transaction, so a crash never
leaves half a decision. A change is written ahead: the loop stores the decision as ``intended``
before the realizer touches the cluster and then updates it to ``applied``, ``failed`` or
``rolled-back`` with the error (:meth:`SqliteStateStore.update_decision`), so a task killed in the
middle of a change still leaves its row (see :data:`STATUSES`). A policy with memory (``stages.PolicyMemory``) has it written in the
same transaction as the decision it led to (:meth:`SqliteStateStore.record_decision`,
``memory=``), one row per job and policy, and read back by :meth:`SqliteStateStore.policy_memory`. Use :class:`SqliteStateStore` in jobs and :class:`MemoryStateStore` in
tests of other stages.
"""

from __future__ import annotations

import json
import sqlite3
from contextlib import closing
from pathlib import Path
from typing import Any

import pandas as pd

from flinktune.decision import Decision, JobState
from flinktune.decision.stages import RealizeResult

__all__ = ["DECISION_COLUMNS", "STATUSES", "UNSETTLED", "MemoryStateStore", "SqliteStateStore"]

DECISION_COLUMNS = (
    "id",
    "job",
    "ts",
    "policy",
    "action",
    "reason",
    "target",
    "profile_configs",
    "state",
    "inputs",
    "changed",
    "mode",
    "downtime_s",
    "dry_run",
    "status",
    "error",
)

#: A decision row's status: ``recorded`` (nothing to apply: keep, profile, dry run), ``intended``
#: (stored before the apply; still so only when the task died during it), ``applied``, ``failed``
#: (the apply raised or ran out of budget; the change may have landed), ``rolled-back``, and
#: ``reconciled`` (a row the start of a run wrote when the cluster differed from the store).
STATUSES = ("recorded", "intended", "applied", "failed", "rolled-back", "reconciled")
#: Statuses whose outcome on the cluster is not known from the row alone (reconciliation settles them).
UNSETTLED = ("intended", "failed")

_SCHEMA = """
CREATE TABLE IF NOT EXISTS decisions (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    job TEXT NOT NULL,
    ts REAL NOT NULL,
    policy TEXT NOT NULL,
    action TEXT NOT NULL,
    reason TEXT NOT NULL,
    target TEXT,
    profile_configs TEXT NOT NULL,
    state TEXT NOT NULL,
    inputs TEXT NOT NULL,
    changed INTEGER NOT NULL,
    mode TEXT,
    downtime_s REAL NOT NULL,
    dry_run INTEGER NOT NULL,
    status TEXT NOT NULL DEFAULT 'recorded',
    error TEXT
);
CREATE INDEX IF NOT EXISTS decisions_job_ts ON decisions(job, ts);
CREATE TABLE IF NOT EXISTS policy_memory (
    job TEXT NOT NULL,
    policy TEXT NOT NULL,
    ts REAL NOT NULL,
    decision_id INTEGER NOT NULL,
    memory TEXT NOT NULL,
    PRIMARY KEY (job, policy)
);
CREATE TABLE IF NOT EXISTS forecasts (
    job TEXT NOT NULL,
    ts REAL NOT NULL,
    model TEXT NOT NULL,
    planned_rate REAL NOT NULL,
    bins TEXT NOT NULL,
    PRIMARY KEY (job, ts)
);
"""


def _status(result: RealizeResult | None, status: str | None) -> str:
    if status is not None:
        if status not in STATUSES:
            raise ValueError(f"decision status {status!r} is not one of {STATUSES}")
        return status
    if result is None:
        return "recorded"
    if str(result.mode) == "rolled-back":
        return "rolled-back"
    return "applied" if result.changed else "recorded"


def _row(
    job: str,
    ts: float,
    state: JobState,
    decision: Decision,
    result: RealizeResult | None,
    dry_run: bool,
    status: str | None = None,
    error: str | None = None,
) -> tuple:
    d = decision.to_dict()
    return (
        job,
        ts,
        decision.policy,
        decision.action.value,
        decision.reason,
        json.dumps(d["target"]) if d["target"] else None,
        json.dumps(d["profile_configs"]),
        json.dumps(state.to_dict(), default=float),
        json.dumps(decision.inputs, default=float, sort_keys=True),
        int(bool(result and result.changed)),
        str(result.mode) if result else None,
        float(result.downtime_s) if result else 0.0,
        int(dry_run),
        _status(result, status),
        error,
    )


def _outcome(result: RealizeResult | None, status: str, error: str | None) -> tuple:
    """The columns :meth:`SqliteStateStore.update_decision` sets, in the order it sets them."""
    return (
        int(bool(result and result.changed)),
        str(result.mode) if result else None,
        float(result.downtime_s) if result else 0.0,
        _status(result, status),
        error,
    )


def _memory_json(memory: tuple[str, dict[str, Any]] | None) -> str | None:
    if memory is None:
        return None
    try:
        return json.dumps(memory[1], sort_keys=True, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"policy {memory[0]!r}: its memory is not plain JSON ({exc}); nothing was stored") from None


class SqliteStateStore:
    """Decisions and forecasts in one SQLite file."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with closing(self._connect()) as con, con:
            con.executescript(_SCHEMA)
            have = {r[1] for r in con.execute("PRAGMA table_info(decisions)")}
            # Stores written before the write-ahead columns existed: every old row was a settled decision.
            if "status" not in have:
                con.execute("ALTER TABLE decisions ADD COLUMN status TEXT NOT NULL DEFAULT 'recorded'")
                con.execute("UPDATE decisions SET status = 'applied' WHERE changed = 1")
            if "error" not in have:
                con.execute("ALTER TABLE decisions ADD COLUMN error TEXT")

    def _connect(self) -> sqlite3.Connection:
        return sqlite3.connect(self.path, timeout=30)

    def record_decision(
        self,
        job: str,
        ts: float,
        state: JobState,
        decision: Decision,
        result: RealizeResult | None,
        *,
        dry_run: bool = False,
        memory: tuple[str, dict[str, Any]] | None = None,
        status: str | None = None,
        error: str | None = None,
    ) -> int:
        """Store one decision; ``memory`` = (policy name, its memory) replaces that policy's saved memory
        in the same transaction. ``status`` defaults from ``result`` (see :data:`STATUSES`); pass
        ``status="intended"`` to write a change ahead of its apply. Returns the decision's id."""
        payload = _memory_json(memory)
        with closing(self._connect()) as con, con:
            cur = con.execute(
                "INSERT INTO decisions (job, ts, policy, action, reason, target, profile_configs, state, inputs,"
                " changed, mode, downtime_s, dry_run, status, error) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
                _row(job, ts, state, decision, result, dry_run, status, error),
            )
            decision_id = int(cur.lastrowid or 0)
            if memory is not None:
                con.execute(
                    "INSERT OR REPLACE INTO policy_memory (job, policy, ts, decision_id, memory) VALUES (?,?,?,?,?)",
                    (job, memory[0], ts, decision_id, payload),
                )
            return decision_id

    def update_decision(
        self,
        decision_id: int,
        result: RealizeResult | None,
        *,
        status: str,
        error: str | None = None,
        memory: tuple[str, dict[str, Any]] | None = None,
    ) -> None:
        """Settle a written-ahead decision: its outcome, ``status`` and ``error`` (and the policy's
        memory, in the same transaction). A KeyError names an unknown id."""
        payload = _memory_json(memory)
        with closing(self._connect()) as con, con:
            cur = con.execute(
                "UPDATE decisions SET changed = ?, mode = ?, downtime_s = ?, status = ?, error = ? WHERE id = ?",
                (*_outcome(result, status, error), int(decision_id)),
            )
            if cur.rowcount != 1:
                raise KeyError(f"state store {self.path}: no decision with id {decision_id} to update")
            if memory is not None:
                job, ts = con.execute("SELECT job, ts FROM decisions WHERE id = ?", (int(decision_id),)).fetchone()
                con.execute(
                    "INSERT OR REPLACE INTO policy_memory (job, policy, ts, decision_id, memory) VALUES (?,?,?,?,?)",
                    (job, memory[0], ts, int(decision_id), payload),
                )

    def policy_memory(self, job: str, policy: str) -> dict[str, Any] | None:
        """The memory ``policy`` saved with its last decision for ``job`` (None before any)."""
        with closing(self._connect()) as con:
            row = con.execute("SELECT memory FROM policy_memory WHERE job = ? AND policy = ?", (job, policy)).fetchone()
        return None if row is None else json.loads(row[0])

    def record_forecast(self, job: str, ts: float, model: str, planned_rate: float, bins: pd.DataFrame) -> None:
        payload = bins.assign(bin_start=bins["bin_start"].astype("int64") // 10**6).to_json(orient="records")
        with closing(self._connect()) as con, con:
            con.execute(
                "INSERT OR REPLACE INTO forecasts (job, ts, model, planned_rate, bins) VALUES (?,?,?,?,?)",
                (job, ts, model, planned_rate, payload),
            )

    def decisions(self, job: str, limit: int | None = None) -> pd.DataFrame:
        """Decisions of a job, oldest first (the newest ``limit`` when given)."""
        q = "SELECT * FROM decisions WHERE job = ? ORDER BY ts DESC, id DESC"
        params: list[Any] = [job]
        if limit is not None:
            q += " LIMIT ?"
            params.append(int(limit))
        with closing(self._connect()) as con:
            df = pd.read_sql_query(q, con, params=params)
        return df.iloc[::-1].reset_index(drop=True)

    def forecasts(self, job: str) -> pd.DataFrame:
        with closing(self._connect()) as con:
            return pd.read_sql_query("SELECT * FROM forecasts WHERE job = ? ORDER BY ts", con, params=[job])

    def jobs(self) -> list[str]:
        with closing(self._connect()) as con:
            return [r[0] for r in con.execute("SELECT DISTINCT job FROM decisions ORDER BY job")]


class MemoryStateStore:
    """In-memory store with the same interface, for tests of other stages."""

    def __init__(self) -> None:
        self._rows: list[dict[str, Any]] = []
        self._memory: dict[tuple[str, str], str] = {}

    def record_decision(
        self,
        job: str,
        ts: float,
        state: JobState,
        decision: Decision,
        result: RealizeResult | None,
        *,
        dry_run: bool = False,
        memory: tuple[str, dict[str, Any]] | None = None,
        status: str | None = None,
        error: str | None = None,
    ) -> int:
        values = _row(job, ts, state, decision, result, dry_run, status, error)
        payload = _memory_json(memory)  # serialised like the SQLite store's, so what comes back is the same
        self._rows.append(dict(zip(DECISION_COLUMNS, (len(self._rows) + 1, *values))))
        if memory is not None and payload is not None:
            self._memory[(job, memory[0])] = payload
        return len(self._rows)

    def update_decision(
        self,
        decision_id: int,
        result: RealizeResult | None,
        *,
        status: str,
        error: str | None = None,
        memory: tuple[str, dict[str, Any]] | None = None,
    ) -> None:
        if not 1 <= decision_id <= len(self._rows):
            raise KeyError(f"memory state store: no decision with id {decision_id} to update")
        payload = _memory_json(memory)
        row = self._rows[decision_id - 1]
        row.update(zip(("changed", "mode", "downtime_s", "status", "error"), _outcome(result, status, error)))
        if memory is not None and payload is not None:
            self._memory[(row["job"], memory[0])] = payload

    def policy_memory(self, job: str, policy: str) -> dict[str, Any] | None:
        payload = self._memory.get((job, policy))
        return None if payload is None else json.loads(payload)

    def record_forecast(self, job: str, ts: float, model: str, planned_rate: float, bins: pd.DataFrame) -> None:
        return None

    def decisions(self, job: str, limit: int | None = None) -> pd.DataFrame:
        rows = [r for r in self._rows if r["job"] == job]
        if limit is not None:
            rows = rows[-limit:]
        return pd.DataFrame(rows, columns=list(DECISION_COLUMNS))
