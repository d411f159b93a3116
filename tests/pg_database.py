"""Throwaway PostgreSQL databases on the machine's server (127.0.0.1:5432, trust auth, user postgres).

Use :func:`throwaway_database` inside a module-scoped fixture (``yield from throwaway_database("x")``):
it creates a database, yields its URL and drops it afterwards, and skips the test with the reason when
no server answers. :func:`drop_store_tables` empties a state store between tests.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.exc import OperationalError

__all__ = ["ADMIN_URL", "drop_store_tables", "throwaway_database"]

ADMIN_URL = "postgresql+psycopg2://postgres@127.0.0.1:5432/postgres"


def throwaway_database(prefix: str) -> Iterator[str]:
    """Create ``<prefix>_<random>``, yield its URL (``postgresql://...``), drop it at the end."""
    name = f"{prefix}_{uuid.uuid4().hex[:10]}"
    admin = create_engine(ADMIN_URL, isolation_level="AUTOCOMMIT", connect_args={"connect_timeout": 3})
    try:
        with admin.connect() as con:
            con.execute(text(f'CREATE DATABASE "{name}"'))
    except OperationalError as exc:
        admin.dispose()
        pytest.skip(f"PostgreSQL at 127.0.0.1:5432 is not reachable as user postgres: {str(exc.orig).strip().splitlines()[0]}")
    try:
        yield f"postgresql://postgres@127.0.0.1:5432/{name}"
    finally:
        with admin.connect() as con:
            con.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()


def drop_store_tables(url: str) -> None:
    """Drop the state store's tables, so the next store starts empty."""
    engine = create_engine(url.replace("postgresql://", "postgresql+psycopg2://", 1))
    with engine.begin() as con:
        con.execute(text("DROP TABLE IF EXISTS decisions, policy_memory, forecasts, job_modes"))
    engine.dispose()
