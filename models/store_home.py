"""A SQLite MLflow store that moves with its state folder: absolute paths inside it follow the folder.

MLflow writes absolute paths into its database (each experiment's artifact location, each run's artifact
URI, model versions' sources, LoggedModels' locations, dataset sources naming the lake). A copied or moved
state folder would then log into, and read from, the original. Use :func:`follow_home` before MLflow opens
a ``sqlite:///<home>/mlflow/mlflow.db`` store (:func:`models.registry.configure` does): it records the
folder the store lives in (``<home>/mlflow/store-home.json``) and, when the folder is no longer there,
rewrites every stored path under the old folder to the same path under the new one, in one transaction.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

from flinktune.lake.atomic import atomic_write

__all__ = ["HOME_FILE", "follow_home", "store_home"]

HOME_FILE = "store-home.json"
_ARTIFACTS = "/mlflow/artifacts/"


def store_home(tracking_uri: str) -> Path | None:
    """The state folder of a ``sqlite:///<home>/mlflow/<file>.db`` store; None for any other store."""
    if not tracking_uri.startswith("sqlite:///"):
        return None
    db = Path(tracking_uri[len("sqlite:///") :])
    return db.resolve().parent.parent if db.parent.name == "mlflow" else None


def _recorded(db: Path, marker: Path) -> str | None:
    """The folder the store was last used in: the marker's, else read off an experiment's artifact location."""
    try:
        return str(json.loads(marker.read_text())["home"])
    except (OSError, ValueError, KeyError, TypeError):
        pass
    with sqlite3.connect(db) as con:  # a store from before the marker: its experiments name their folder
        try:
            rows = con.execute("SELECT artifact_location FROM experiments WHERE artifact_location LIKE ?", (f"%{_ARTIFACTS}%",))
        except sqlite3.DatabaseError:
            return None
        for (location,) in rows:
            path = str(location).removeprefix("file://")
            return path.split(_ARTIFACTS)[0]
    return None


def _write_marker(marker: Path, home: Path) -> None:
    atomic_write(marker, json.dumps({"home": str(home)}).encode())


def follow_home(tracking_uri: str) -> int:
    """Rebase the stored paths of a SQLite store onto the folder it is in now; returns the values rewritten.

    Nothing happens for a store that is not ``<home>/mlflow/*.db``, one that does not exist yet (only the
    marker is written) or one already in the folder it records."""
    home = store_home(tracking_uri)
    if home is None:
        return 0
    db = Path(tracking_uri[len("sqlite:///") :]).resolve()
    marker = db.parent / HOME_FILE
    if not db.is_file():
        _write_marker(marker, home)
        return 0
    old = _recorded(db, marker)
    if old is None or old == str(home):
        if old is None or not marker.is_file():
            _write_marker(marker, home)
        return 0
    # A separator after the folder: /a/var must not rewrite /a/var2/...
    before, after = old.rstrip("/") + "/", str(home) + "/"
    changed = 0
    with sqlite3.connect(db) as con:  # one transaction: all the paths move, or none
        tables = [r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        for table in tables:
            for column in con.execute(f'PRAGMA table_info("{table}")').fetchall():
                name, kind = column[1], str(column[2]).upper()
                if "CHAR" not in kind and "TEXT" not in kind and "CLOB" not in kind:
                    continue
                cur = con.execute(
                    f'UPDATE "{table}" SET "{name}" = REPLACE("{name}", ?, ?) WHERE instr("{name}", ?) > 0',
                    (before, after, before),
                )
                changed += cur.rowcount
    _write_marker(marker, home)
    return changed
