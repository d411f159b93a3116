"""Durable state of the tuner: decisions with their inputs, reasons and outcomes, forecasts, and
the policy's memory.

SQLite by default (``settings.state_db``); every write is one transaction, so a crash never
leaves half a decision. A policy with memory (``stages.PolicyMemory``) has it written in the
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

__all__ = ["SqliteStateStore", "MemoryStateStore", "DECISION_COLUMNS"]

DECISION_COLUMNS = (
    "id", "job", "ts", "policy", "action", "reason", "target", "profile_configs",
    "state", "inputs", "changed", "mode", "downtime_s", "dry_run",
)

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
    dry_run INTEGER NOT NULL
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


def _row(job: str, ts: float, state: JobState, decision: Decision, result: RealizeResult | None, dry_run: bool) -> tuple:
    d = decision.to_dict()
    return (
        job, ts, decision.policy, decision.action.value, decision.reason,
        json.dumps(d["target"]) if d["target"] else None,
        json.dumps(d["profile_configs"]),
        json.dumps(state.to_dict(), default=float),
        json.dumps(decision.inputs, default=float, sort_keys=True),
        int(bool(result and result.changed)),
        str(result.mode) if result else None,
        float(result.downtime_s) if result else 0.0,
        int(dry_run),
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

    def _connect(self) -> sqlite3.Connection:
        return sqlite3.connect(self.path, timeout=30)

    def record_decision(
        self, job: str, ts: float, state: JobState, decision: Decision, result: RealizeResult | None, *, dry_run: bool = False,
        memory: tuple[str, dict[str, Any]] | None = None,
    ) -> int:
        """Store one decision; ``memory`` = (policy name, its memory) replaces that policy's saved memory
        in the same transaction. Returns the decision's id."""
        payload = _memory_json(memory)
        with closing(self._connect()) as con, con:
            cur = con.execute(
                "INSERT INTO decisions (job, ts, policy, action, reason, target, profile_configs, state, inputs,"
                " changed, mode, downtime_s, dry_run) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)",
                _row(job, ts, state, decision, result, dry_run),
            )
            decision_id = int(cur.lastrowid or 0)
            if memory is not None:
                con.execute("INSERT OR REPLACE INTO policy_memory (job, policy, ts, decision_id, memory) VALUES (?,?,?,?,?)",
                            (job, memory[0], ts, decision_id, payload))  # fmt: skip
            return decision_id

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
        self, job: str, ts: float, state: JobState, decision: Decision, result: RealizeResult | None, *, dry_run: bool = False,
        memory: tuple[str, dict[str, Any]] | None = None,
    ) -> int:
        values = _row(job, ts, state, decision, result, dry_run)
        payload = _memory_json(memory)  # serialised like the SQLite store's, so what comes back is the same
        self._rows.append(dict(zip(DECISION_COLUMNS, (len(self._rows) + 1, *values))))
        if memory is not None and payload is not None:
            self._memory[(job, memory[0])] = payload
        return len(self._rows)

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
