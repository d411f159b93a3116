"""Durable state of the tuner: decisions with their inputs, reasons and outcomes, forecasts, the
policy's memory, each job's mode (advice or act) and the lock that lets one decider act per job.

Use :func:`open_state_store` in jobs: PostgreSQL when ``FLINKTUNE_STATE_URL`` is set (the
production store, shared by every worker and the API server), else the embedded SQLite file
``settings.state_db``; :class:`MemoryStateStore` in tests of other stages. An existing file that
is empty, not SQLite, another program's database, or a folder is refused with one line and left
as it is: starting a new store is the explicit step of moving it away. Every write is one
transaction, so a crash never leaves half a decision. A change is written ahead: the loop stores
the decision as ``intended`` before the realizer touches the cluster and then updates it to
``applied``, ``failed`` or ``rolled-back`` (:meth:`SqlStateStore.update_decision`, see
:data:`STATUSES`). A policy's memory is written in the same transaction as the decision it led to
(``record_decision(memory=...)``). :meth:`SqlStateStore.decision_lock` is held around deciding
and recording: a PostgreSQL advisory lock, a POSIX record lock on ``<state_db>.lock`` for SQLite.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import sqlite3
import time
from collections.abc import Iterator
from contextlib import closing, contextmanager
from pathlib import Path
from typing import Any

import pandas as pd
from sqlalchemy import (
    Column,
    Double,
    Engine,
    Index,
    Integer,
    MetaData,
    Table,
    Text,
    create_engine,
    func,
    inspect,
    make_url,
    select,
    text,
    update,
)
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.pool import NullPool

from flinktune.decision.reconfig import ReconfigMode
from flinktune.decision.stages import DecisionOutcome, DecisionRecord, RealizeResult

__all__ = [
    "DECISION_COLUMNS",
    "MODES",
    "STATUSES",
    "UNSETTLED",
    "MemoryStateStore",
    "NoStateStore",
    "SqlStateStore",
    "SqliteStateStore",
    "StateStoreError",
    "open_state_store",
]

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
#: A job's mode: ``advise`` (decisions recorded and shown, nothing changed; every job starts so) or ``act``.
MODES = ("advise", "act")

_SQLITE_MAGIC = b"SQLite format 3\x00"
_META = MetaData()
_DECISIONS = Table(
    "decisions",
    _META,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("job", Text, nullable=False),
    Column("ts", Double, nullable=False),
    Column("policy", Text, nullable=False),
    Column("action", Text, nullable=False),
    Column("reason", Text, nullable=False),
    Column("target", Text),
    Column("profile_configs", Text, nullable=False),
    Column("state", Text, nullable=False),
    Column("inputs", Text, nullable=False),
    Column("changed", Integer, nullable=False),
    Column("mode", Text),
    Column("downtime_s", Double, nullable=False),
    Column("dry_run", Integer, nullable=False),
    Column("status", Text, nullable=False, server_default="recorded"),
    Column("error", Text),
    sqlite_autoincrement=True,
)
Index("decisions_job_ts", _DECISIONS.c.job, _DECISIONS.c.ts)
_MEMORY = Table(
    "policy_memory",
    _META,
    Column("job", Text, primary_key=True),
    Column("policy", Text, primary_key=True),
    Column("ts", Double, nullable=False),
    Column("decision_id", Integer, nullable=False),
    Column("memory", Text, nullable=False),
)
_FORECASTS = Table(
    "forecasts",
    _META,
    Column("job", Text, primary_key=True),
    Column("ts", Double, primary_key=True),
    Column("model", Text, nullable=False),
    Column("planned_rate", Double, nullable=False),
    Column("bins", Text, nullable=False),
)
_MODES = Table(
    "job_modes",
    _META,
    Column("job", Text, primary_key=True),
    Column("mode", Text, nullable=False),
    Column("set_by", Text, nullable=False),
    Column("set_at", Double, nullable=False),
)
#: Serialises schema creation on PostgreSQL: two first runs at once would both create the tables.
_SCHEMA_LOCK_KEY = 0x666C696E6B74756E  # "flinktun"


class StateStoreError(ValueError):
    """The state store cannot be opened as one (the message names where it is and what to do)."""


class NoStateStore(StateStoreError):
    """A read-only open found no store yet: nothing has been recorded."""


def _status(result: RealizeResult | None, status: str | None) -> str:
    if status is not None:
        if status not in STATUSES:
            raise ValueError(f"decision status {status!r} is not one of {STATUSES}")
        return status
    if result is None:
        return "recorded"
    if result.mode is ReconfigMode.ROLLED_BACK:
        return "rolled-back"
    return "applied" if result.changed else "recorded"


def _row(record: DecisionRecord) -> tuple:
    decision, result = record.decision, record.result
    d = decision.to_dict()
    return (
        record.job,
        record.ts,
        decision.policy,
        decision.action.value,
        decision.reason,
        json.dumps(d["target"]) if d["target"] else None,
        json.dumps(d["profile_configs"]),
        json.dumps(record.state.to_dict(), default=float),
        json.dumps(decision.inputs, default=float, sort_keys=True),
        int(bool(result and result.changed)),
        str(result.mode) if result else None,
        float(result.downtime_s) if result else 0.0,
        int(record.dry_run),
        _status(result, record.status),
        record.error,
    )


def _outcome(outcome: DecisionOutcome) -> tuple:
    """The columns :meth:`SqlStateStore.update_decision` sets, in the order it sets them."""
    result = outcome.result
    return (
        int(bool(result and result.changed)),
        str(result.mode) if result else None,
        float(result.downtime_s) if result else 0.0,
        _status(result, outcome.status),
        outcome.error,
    )


def _memory_entry(memory: tuple[str, dict[str, Any]] | None) -> tuple[str, str] | None:
    """(policy, its memory as JSON); the JSON is what both stores keep, so what comes back is the same."""
    if memory is None:
        return None
    try:
        return memory[0], json.dumps(memory[1], sort_keys=True, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"policy {memory[0]!r}: its memory is not plain JSON ({exc}); nothing was stored") from None


def _checked_mode(job: str, mode: str, by: str) -> None:
    if mode not in MODES:
        raise ValueError(f"job {job!r}: mode {mode!r} is not one of {', '.join(MODES)}")
    if not by.strip():
        raise ValueError(f"job {job!r}: a mode switch names who made it (by=...)")


def _lock_key(job: str) -> int:
    """A stable signed 64-bit key per job (PostgreSQL advisory locks take a bigint)."""
    return int.from_bytes(hashlib.sha256(f"flinktune-decide:{job}".encode()).digest()[:8], "big", signed=True)


def _upsert(con: Any, table: Table, values: dict[str, Any], keys: tuple[str, ...]) -> None:
    """Insert ``values`` or replace the row with the same ``keys`` (SQLite and PostgreSQL spell it alike)."""
    if con.dialect.name == "postgresql":
        from sqlalchemy.dialects.postgresql import insert as pg_insert

        stmt: Any = pg_insert(table)
    else:
        from sqlalchemy.dialects.sqlite import insert as sqlite_insert

        stmt = sqlite_insert(table)
    stmt = stmt.values(**values)
    con.execute(stmt.on_conflict_do_update(index_elements=list(keys), set_={k: v for k, v in values.items() if k not in keys}))


class _DecisionRecords:
    """How a store records and settles a decision: the row, the outcome and the policy memory's JSON are
    made here, checked before anything is written; a store keeps them with ``_insert`` and ``_settle``."""

    def record_decision(self, record: DecisionRecord, *, memory: tuple[str, dict[str, Any]] | None = None) -> int:
        """Store one decision; ``memory`` = (policy name, its memory) replaces that policy's saved memory
        in the same transaction. The record's ``status`` is checked against :data:`STATUSES`. Returns the
        decision's id."""
        entry = _memory_entry(memory)
        values = dict(zip(DECISION_COLUMNS[1:], _row(record)))
        return self._insert(values, entry)

    def update_decision(
        self, decision_id: int, outcome: DecisionOutcome, *, memory: tuple[str, dict[str, Any]] | None = None
    ) -> None:
        """Settle a written-ahead decision with its ``outcome`` (and the policy's memory, in the same
        transaction). A KeyError names an unknown id."""
        entry = _memory_entry(memory)
        columns = dict(zip(("changed", "mode", "downtime_s", "status", "error"), _outcome(outcome)))
        if outcome.result is not None and outcome.result.mode is ReconfigMode.DRY_RUN:
            columns["dry_run"] = 1  # a realizer that only computed the change (advice on Kubernetes): never applied
        self._settle(int(decision_id), columns, entry)

    def _insert(self, values: dict[str, Any], memory: tuple[str, str] | None) -> int:
        """Add the decision row ``values`` (all columns but the id) and, when given, the (policy, JSON) memory; its id."""
        raise NotImplementedError

    def _settle(self, decision_id: int, outcome: dict[str, Any], memory: tuple[str, str] | None) -> None:
        """Set ``outcome``'s columns of the decision ``decision_id`` (KeyError when unknown) and the memory."""
        raise NotImplementedError


class SqlStateStore(_DecisionRecords):
    """Decisions, forecasts, policy memory and job modes in one SQL database (SQLAlchemy URL).

    ``create=False`` opens an existing store only (read-only views): a missing schema is an error."""

    def __init__(self, url: str, *, create: bool = True) -> None:
        self.url = url
        parsed = make_url(url)
        if parsed.drivername == "postgresql":  # psycopg2 is the driver the project pins (SQLAlchemy 2.1 would pick psycopg 3)
            parsed = parsed.set(drivername="postgresql+psycopg2")
        self.engine: Engine = create_engine(parsed, poolclass=NullPool, **self._engine_options())
        self.where = self.engine.url.render_as_string(hide_password=True)
        try:
            with self.engine.begin() as con:
                if create and con.dialect.name == "postgresql":
                    con.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": _SCHEMA_LOCK_KEY})
                if create:
                    _META.create_all(con)
                    self._migrate(con)
                elif not inspect(con).has_table("decisions"):
                    raise NoStateStore(f"state store {self.where}: holds no flinktune tables yet (no decision recorded)")
        except SQLAlchemyError as exc:  # unreachable server, refused login, damaged file: one line, no traceback
            raise StateStoreError(f"state store {self.where}: cannot be opened ({_first_line(exc)})") from None

    def _engine_options(self) -> dict[str, Any]:
        return {}

    @staticmethod
    def _migrate(con: Any) -> None:
        have = {c["name"] for c in inspect(con).get_columns("decisions")}
        # Stores written before the write-ahead columns existed: every old row was a settled decision.
        if "status" not in have:
            con.execute(text("ALTER TABLE decisions ADD COLUMN status TEXT NOT NULL DEFAULT 'recorded'"))
            con.execute(text("UPDATE decisions SET status = 'applied' WHERE changed = 1"))
        if "error" not in have:
            con.execute(text("ALTER TABLE decisions ADD COLUMN error TEXT"))

    @property
    def dialect(self) -> str:
        return str(self.engine.dialect.name)

    def _insert(self, values: dict[str, Any], memory: tuple[str, str] | None) -> int:
        with self.engine.begin() as con:
            key = con.execute(_DECISIONS.insert().values(**values)).inserted_primary_key
            assert key is not None  # an INSERT of one row always has one
            decision_id = int(key[0])
            if memory is not None:
                row = {
                    "job": values["job"],
                    "policy": memory[0],
                    "ts": values["ts"],
                    "decision_id": decision_id,
                    "memory": memory[1],
                }
                _upsert(con, _MEMORY, row, ("job", "policy"))
            return decision_id

    def _settle(self, decision_id: int, outcome: dict[str, Any], memory: tuple[str, str] | None) -> None:
        with self.engine.begin() as con:
            cur = con.execute(update(_DECISIONS).where(_DECISIONS.c.id == decision_id).values(**outcome))
            if cur.rowcount != 1:
                raise KeyError(f"state store {self.where}: no decision with id {decision_id} to update")
            if memory is not None:
                job, ts = con.execute(select(_DECISIONS.c.job, _DECISIONS.c.ts).where(_DECISIONS.c.id == decision_id)).one()
                row = {"job": job, "policy": memory[0], "ts": ts, "decision_id": decision_id, "memory": memory[1]}
                _upsert(con, _MEMORY, row, ("job", "policy"))

    def policy_memory(self, job: str, policy: str) -> dict[str, Any] | None:
        """The memory ``policy`` saved with its last decision for ``job`` (None before any)."""
        with self.engine.connect() as con:
            row = con.execute(select(_MEMORY.c.memory).where(_MEMORY.c.job == job, _MEMORY.c.policy == policy)).first()
        return None if row is None else json.loads(row[0])

    def record_forecast(self, job: str, ts: float, model: str, planned_rate: float, bins: pd.DataFrame) -> None:
        payload = bins.assign(bin_start=bins["bin_start"].astype("int64") // 10**6).to_json(orient="records")
        with self.engine.begin() as con:
            row = {"job": job, "ts": float(ts), "model": model, "planned_rate": float(planned_rate), "bins": payload}
            _upsert(con, _FORECASTS, row, ("job", "ts"))

    def decisions(self, job: str, limit: int | None = None) -> pd.DataFrame:
        """Decisions of a job, oldest first (the newest ``limit`` when given)."""
        q = select(_DECISIONS).where(_DECISIONS.c.job == job).order_by(_DECISIONS.c.ts.desc(), _DECISIONS.c.id.desc())
        if limit is not None:
            q = q.limit(int(limit))
        with self.engine.connect() as con:
            df = pd.read_sql_query(q, con)
        return df.iloc[::-1].reset_index(drop=True)

    def forecasts(self, job: str) -> pd.DataFrame:
        with self.engine.connect() as con:
            return pd.read_sql_query(select(_FORECASTS).where(_FORECASTS.c.job == job).order_by(_FORECASTS.c.ts), con)

    def jobs(self) -> list[str]:
        """Every job with a recorded decision or a mode switch, sorted."""
        with self.engine.connect() as con:
            decided = {r[0] for r in con.execute(select(_DECISIONS.c.job).distinct())}
            switched = {r[0] for r in con.execute(select(_MODES.c.job))}
        return sorted(decided | switched)

    def set_mode(self, job: str, mode: str, *, by: str, at: float | None = None) -> dict[str, Any]:
        """Switch ``job`` to ``mode`` (:data:`MODES`), recording who (``by``) and when; returns the record."""
        _checked_mode(job, mode, by)
        row = {"job": job, "mode": mode, "set_by": by.strip(), "set_at": float(time.time() if at is None else at)}
        with self.engine.begin() as con:
            _upsert(con, _MODES, row, ("job",))
        return row

    def job_mode(self, job: str) -> dict[str, Any] | None:
        """The last mode switch of ``job`` (``{"job", "mode", "set_by", "set_at"}``), None when never switched."""
        with self.engine.connect() as con:
            row = con.execute(select(_MODES).where(_MODES.c.job == job)).mappings().first()
        return None if row is None else dict(row)

    def decision_count(self) -> int:
        with self.engine.connect() as con:
            return int(con.execute(select(func.count()).select_from(_DECISIONS)).scalar_one())

    @contextmanager
    def decision_lock(self, job: str) -> Iterator[bool]:
        """Hold ``job``'s decider lock for the block if no other process holds it: yields True when
        held (decide, act and record inside), False when another decider has it (do nothing)."""
        key = _lock_key(job)
        with self.engine.connect() as con:
            held = bool(con.execute(text("SELECT pg_try_advisory_lock(:k)"), {"k": key}).scalar_one())
            con.commit()
            try:
                yield held
            finally:
                if held:
                    con.execute(text("SELECT pg_advisory_unlock(:k)"), {"k": key})
                    con.commit()


def _first_line(exc: BaseException) -> str:
    return (str(getattr(exc, "orig", None) or exc).strip().splitlines() or [type(exc).__name__])[0]


def _check_sqlite_file(path: Path, *, create: bool) -> None:
    """Refuse a path that is not (and cannot become) a flinktune SQLite store, leaving it untouched."""
    move = "it is left as it is; move it away to start a new store (the next run creates one)"
    if path.is_dir():
        raise StateStoreError(f"state store {path}: is a folder, not a SQLite file; point FLINKTUNE_STATE_DB at a file")
    if not path.exists():
        if not create:
            raise NoStateStore(f"state store {path}: no such file (no decision recorded yet)")
        if path.parent.exists() and not path.parent.is_dir():
            raise StateStoreError(f"state store {path}: its folder {path.parent} is a file")
        return
    try:
        with path.open("rb") as f:
            head = f.read(len(_SQLITE_MAGIC))
    except OSError as exc:
        raise StateStoreError(f"state store {path}: cannot be read ({exc.strerror})") from None
    if not head:
        raise StateStoreError(f"state store {path}: the file is empty (0 bytes), not a flinktune store; {move}")
    if head != _SQLITE_MAGIC:
        raise StateStoreError(f"state store {path}: not a SQLite database (its first bytes are {head[:8]!r}); {move}")
    try:
        with closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True)) as con:
            tables = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    except sqlite3.DatabaseError as exc:
        raise StateStoreError(f"state store {path}: a damaged SQLite database ({exc}); {move}") from None
    if tables - {"sqlite_sequence"} and "decisions" not in tables:
        raise StateStoreError(
            f"state store {path}: another program's SQLite database (tables {', '.join(sorted(tables))}); {move}"
        )


class SqliteStateStore(SqlStateStore):
    """The embedded store: one SQLite file (``settings.state_db``), created on the first write."""

    def __init__(self, path: str | Path, *, create: bool = True) -> None:
        self.path = Path(path)
        _check_sqlite_file(self.path, create=create)
        if create:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        super().__init__(f"sqlite:///{self.path.resolve()}", create=create)
        self.where = str(self.path)

    def _engine_options(self) -> dict[str, Any]:
        return {"connect_args": {"timeout": 30}}

    @contextmanager
    def decision_lock(self, job: str) -> Iterator[bool]:
        """As :meth:`SqlStateStore.decision_lock`, with a POSIX record lock on one byte of
        ``<state_db>.lock`` per job (released by the kernel when the process dies)."""
        offset = _lock_key(job) & 0x7FFFFFFF
        fd = os.open(f"{self.path}.lock", os.O_RDWR | os.O_CREAT, 0o600)
        try:
            try:
                fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB, 1, offset)
                held = True
            except OSError:
                held = False
            try:
                yield held
            finally:
                if held:
                    fcntl.lockf(fd, fcntl.LOCK_UN, 1, offset)
        finally:
            os.close(fd)


def open_state_store(settings: Any, *, create: bool = True) -> SqlStateStore:
    """The configured store: PostgreSQL at ``settings.state_url`` when set, else SQLite at ``settings.state_db``."""
    url = getattr(settings, "state_url", None)
    if url:
        return SqlStateStore(str(url), create=create)
    return SqliteStateStore(settings.state_db, create=create)


class MemoryStateStore(_DecisionRecords):
    """In-memory store with the same interface, for tests of other stages."""

    def __init__(self) -> None:
        self._rows: list[dict[str, Any]] = []
        self._memory: dict[tuple[str, str], str] = {}
        self._modes: dict[str, dict[str, Any]] = {}
        self._locked: set[str] = set()

    def _insert(self, values: dict[str, Any], memory: tuple[str, str] | None) -> int:
        self._rows.append({"id": len(self._rows) + 1, **values})
        if memory is not None:
            self._memory[(values["job"], memory[0])] = memory[1]
        return len(self._rows)

    def _settle(self, decision_id: int, outcome: dict[str, Any], memory: tuple[str, str] | None) -> None:
        if not 1 <= decision_id <= len(self._rows):
            raise KeyError(f"memory state store: no decision with id {decision_id} to update")
        row = self._rows[decision_id - 1]
        row.update(outcome)
        if memory is not None:
            self._memory[(row["job"], memory[0])] = memory[1]

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

    def set_mode(self, job: str, mode: str, *, by: str, at: float | None = None) -> dict[str, Any]:
        _checked_mode(job, mode, by)
        self._modes[job] = {"job": job, "mode": mode, "set_by": by.strip(), "set_at": float(time.time() if at is None else at)}
        return dict(self._modes[job])

    def job_mode(self, job: str) -> dict[str, Any] | None:
        return dict(self._modes[job]) if job in self._modes else None

    @contextmanager
    def decision_lock(self, job: str) -> Iterator[bool]:
        held = job not in self._locked
        self._locked.add(job)
        try:
            yield held
        finally:
            if held:
                self._locked.discard(job)
