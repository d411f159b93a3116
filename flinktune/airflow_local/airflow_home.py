"""A self-contained AIRFLOW_HOME under ``var/`` for running the DAGs locally with ``dag.test()``.

Use :func:`prepare_airflow_home` once before running DAGs in a fresh process (see
:mod:`flinktune.airflow_local.runner`): it returns the environment variables that point Airflow at
this repository's ``dags/`` and ``plugins/``, a SQLite metadata database inside the home and
small parallelism for a laptop, and it runs ``airflow db migrate`` unless this Airflow version has
already migrated that database. Use :func:`airflow_env` when you only need the variables.

Airflow reads its configuration when it is first imported, so apply the returned variables to a
new process (``subprocess`` with ``env={**os.environ, **env}``); never import Airflow here.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Mapping
from importlib.metadata import version
from pathlib import Path

from flinktune.lake.atomic import atomic_write

__all__ = [
    "DB_CACHE_VARIABLE",
    "DEFAULT_DAGS_FOLDER",
    "DEFAULT_PLUGINS_FOLDER",
    "AirflowHomeError",
    "airflow_env",
    "prepare_airflow_home",
]

_REPO_ROOT = Path(__file__).resolve().parents[2]
DEFAULT_DAGS_FOLDER = _REPO_ROOT / "dags"
DEFAULT_PLUGINS_FOLDER = _REPO_ROOT / "plugins"

_DB_NAME = "airflow.db"
_MARKER_NAME = ".flinktune-migrated.json"
_TAIL_LINES = 25
#: The folder of migrated databases (:func:`prepare_airflow_home`'s ``db_cache``); the setting ``airflow_db_cache``.
DB_CACHE_VARIABLE = "FLINKTUNE_AIRFLOW_DB_CACHE"


class AirflowHomeError(RuntimeError):
    """The AIRFLOW_HOME could not be prepared; the message names the path or command that failed."""


def airflow_env(
    var_dir: str | Path,
    *,
    dags_folder: str | Path | None = None,
    plugins_folder: str | Path | None = None,
    database_url: str | None = None,
) -> dict[str, str]:
    """The Airflow variables for a home at ``<var_dir>/airflow``, without touching the disk.

    Returns ``{"AIRFLOW_HOME": ..., "AIRFLOW__SECTION__KEY": ...}``, all paths absolute.
    ``dags_folder`` / ``plugins_folder`` default to this repository's ``dags/`` and ``plugins/``;
    ``database_url`` (a SQLAlchemy URL, e.g. ``postgresql+psycopg2://...``) replaces the SQLite
    metadata database inside the home.
    """
    home = Path(var_dir).resolve() / "airflow"
    return {
        "AIRFLOW_HOME": str(home),
        "AIRFLOW__CORE__DAGS_FOLDER": str(Path(dags_folder or DEFAULT_DAGS_FOLDER).resolve()),
        "AIRFLOW__CORE__PLUGINS_FOLDER": str(Path(plugins_folder or DEFAULT_PLUGINS_FOLDER).resolve()),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW__CORE__UNIT_TEST_MODE": "False",
        # dag.test() runs tasks in its own process; LocalExecutor is only what the config must name.
        "AIRFLOW__CORE__EXECUTOR": "LocalExecutor",
        # Two cores on the reference machine: keep Spark and torch from fighting over them.
        "AIRFLOW__CORE__PARALLELISM": "2",
        "AIRFLOW__CORE__MAX_ACTIVE_TASKS_PER_DAG": "2",
        "AIRFLOW__CORE__DAGBAG_IMPORT_TIMEOUT": "30",
        "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": database_url or f"sqlite:///{home / _DB_NAME}",
        "AIRFLOW__LOGGING__BASE_LOG_FOLDER": str(home / "logs"),
        # If someone starts `airflow api-server` with this env, it must stay on the loopback.
        "AIRFLOW__API__HOST": "127.0.0.1",
    }


def prepare_airflow_home(
    var_dir: str | Path,
    *,
    dags_folder: str | Path | None = None,
    plugins_folder: str | Path | None = None,
    database_url: str | None = None,
    timeout_s: float = 300.0,
    db_cache: str | Path | None = None,
) -> dict[str, str]:
    """Create ``<var_dir>/airflow``, migrate its SQLite database once, and return :func:`airflow_env`.

    Idempotent and cheap when already done: a marker file records the Airflow version that
    migrated the database, and a newer Airflow migrates it again. The migration runs on a copy
    that replaces the database only when ``airflow db migrate`` succeeds, so an interrupted or
    failed run never leaves a half-migrated database behind. Concurrent callers are serialised by
    a lock file. With ``database_url`` (a server database such as PostgreSQL) the migration runs
    on that database directly: Airflow's migrations there are transactional. Raises
    :class:`AirflowHomeError` naming the folder, database or the failed command.

    ``db_cache`` (default: the ``FLINKTUNE_AIRFLOW_DB_CACHE`` folder, the setting ``airflow_db_cache``)
    keeps one migrated, empty SQLite database per Airflow version: a new home starts from a copy of
    it instead of migrating (10-20 s of CPU each), and the first home to migrate fills it. A home
    with a database of its own is never replaced from it.
    """
    if db_cache is None:
        db_cache = os.environ.get(DB_CACHE_VARIABLE) or None
    env = airflow_env(var_dir, dags_folder=dags_folder, plugins_folder=plugins_folder, database_url=database_url)
    for key in ("AIRFLOW__CORE__DAGS_FOLDER", "AIRFLOW__CORE__PLUGINS_FOLDER"):
        if not Path(env[key]).is_dir():
            raise AirflowHomeError(f"{key} points at {env[key]}, which is not a directory")
    home = Path(env["AIRFLOW_HOME"])
    try:
        (home / "logs").mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise AirflowHomeError(f"cannot create AIRFLOW_HOME {home}: {exc}") from exc

    with open(home / ".prepare.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        if database_url and not database_url.startswith("sqlite"):
            if not _is_migrated(home, database_url):
                _migrate_server(home, env, timeout_s, database_url)
        elif not _is_migrated(home):
            _migrate(home, env, timeout_s, Path(db_cache) if db_cache else None)
    return env


def _airflow_version() -> str:
    return version("apache-airflow-core")


def _is_migrated(home: Path, database_url: str | None = None) -> bool:
    marker = home / _MARKER_NAME
    if not (marker.is_file() and (database_url or (home / _DB_NAME).is_file())):
        return False
    try:
        recorded = json.loads(marker.read_text())
    except (OSError, ValueError):
        return False
    if not isinstance(recorded, dict) or recorded.get("airflow_version") != _airflow_version():
        return False
    return database_url is None or recorded.get("database") == database_url


def _migrate_server(home: Path, env: Mapping[str, str], timeout_s: float, database_url: str) -> None:
    log_path = home / "logs" / "db-migrate.log"
    safe_url = database_url.split("@")[-1]  # never log a password
    with open(log_path, "w") as log:
        try:
            proc = subprocess.run(
                [sys.executable, "-m", "airflow", "db", "migrate"],
                env={**os.environ, **env},
                stdout=log,
                stderr=subprocess.STDOUT,
                timeout=timeout_s,
                check=False,
            )
        except subprocess.TimeoutExpired:
            raise AirflowHomeError(
                f"`airflow db migrate` on {safe_url} did not finish in {timeout_s:.0f} s; log: {log_path}"
            ) from None
    if proc.returncode != 0:
        tail = "\n".join(log_path.read_text(errors="replace").splitlines()[-_TAIL_LINES:])
        raise AirflowHomeError(
            f"`airflow db migrate` failed with exit code {proc.returncode} on database {safe_url}; "
            f"last lines of {log_path}:\n{tail}"
        )
    atomic_write(home / _MARKER_NAME, json.dumps({"airflow_version": _airflow_version(), "database": database_url}).encode())


def _migrate(home: Path, env: Mapping[str, str], timeout_s: float, cache: Path | None = None) -> None:
    db, partial = home / _DB_NAME, home / f"{_DB_NAME}.partial"
    partial.unlink(missing_ok=True)
    upgrade = db.is_file() and (home / _MARKER_NAME).is_file()
    template = cache / f"airflow-{_airflow_version()}.db" if cache is not None else None
    if upgrade:
        shutil.copy2(db, partial)  # an older Airflow's database: upgrade a copy, keep the original
    elif template is not None and template.is_file():
        # `airflow db migrate` writes the schema, the default pool and the log-name templates: the same for every
        # home of one Airflow version (these homes leave the pool and the templates at their defaults).
        shutil.copy2(template, partial)
        os.replace(partial, db)
        _mark_migrated(home, db)
        return
    log_path = home / "logs" / "db-migrate.log"
    cmd = [sys.executable, "-m", "airflow", "db", "migrate"]
    child_env = {**os.environ, **env, "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{partial}"}
    try:
        with open(log_path, "w") as log:
            proc = subprocess.run(cmd, env=child_env, stdout=log, stderr=subprocess.STDOUT, timeout=timeout_s, check=False)
    except subprocess.TimeoutExpired:
        partial.unlink(missing_ok=True)
        raise AirflowHomeError(
            f"`airflow db migrate` for AIRFLOW_HOME={home} did not finish in {timeout_s:.0f} s; log: {log_path}"
        ) from None
    if proc.returncode != 0:
        partial.unlink(missing_ok=True)
        tail = "\n".join(log_path.read_text(errors="replace").splitlines()[-_TAIL_LINES:])
        raise AirflowHomeError(
            f"`airflow db migrate` failed with exit code {proc.returncode} for database {db} "
            f"(AIRFLOW_HOME={home}); last lines of {log_path}:\n{tail}"
        )
    os.replace(partial, db)
    if template is not None and not upgrade:
        _fill_cache(db, template)
    _mark_migrated(home, db)


def _mark_migrated(home: Path, db: Path) -> None:
    atomic_write(home / _MARKER_NAME, json.dumps({"airflow_version": _airflow_version(), "database": str(db)}).encode())


def _fill_cache(db: Path, template: Path) -> None:
    """Keep a copy of a freshly migrated ``db`` as ``template``; a cache that cannot be written costs only time."""
    try:
        template.parent.mkdir(parents=True, exist_ok=True)
        staged = template.with_name(f"{template.name}.{os.getpid()}.partial")
        shutil.copy2(db, staged)
        os.replace(staged, template)  # atomic: another process reads the whole file or none
    except OSError:
        pass
