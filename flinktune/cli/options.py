"""What the ``flinktune`` commands share: checked option values and the state folder a step works in.

Use :func:`fail` for a refusal (one red line, exit code 2), :func:`checked_job` on every ``--job``,
:func:`out_file` / :func:`out_dir` on output paths, and :func:`state_dir` + :func:`nothing_left_on_refusal`
around a step that runs in an existing state folder (``--var-dir``, ``$FLINKTUNE_VAR_DIR``, ``var/`` or
the demo's ``var/demo``).
"""

from __future__ import annotations

import contextlib
import os
import shutil
from collections.abc import Iterator
from enum import Enum
from pathlib import Path

import typer

from flinktune.job_name import JobNameError, job_name
from flinktune.settings import worker_var_dir

__all__ = [
    "DEFAULT_VAR_DIR",
    "DEMO_MARKER",
    "DEMO_SETTINGS",
    "DEMO_VAR_DIR",
    "VAR_DIR_HELP",
    "PolicyName",
    "Workload",
    "checked_job",
    "fail",
    "has_state",
    "nothing_left_on_refusal",
    "out_dir",
    "out_file",
    "state_dir",
    "state_settings",
]

DEMO_MARKER = ".flinktune-demo"
#: The goals a demo ran with, kept in its folder so later steps there judge by the same ones.
DEMO_SETTINGS = "demo-settings.json"


class Workload(str, Enum):
    """The built-in trace shapes and job shapes of the twin."""

    ysb = "ysb"
    tsw = "tsw"


class PolicyName(str, Enum):
    """The policies the pipeline commands run (the replay takes any name of ``POLICY_NAMES``)."""

    static = "static"
    demeter = "demeter"
    flinktune = "flinktune"


def fail(message: str) -> None:
    """Refuse: ``error: <message>`` in red on stderr and exit code 2 (never returns)."""
    typer.secho(f"error: {message}", fg=typer.colors.RED, err=True)
    raise typer.Exit(code=2)


def checked_job(value: str) -> str:
    """``value`` if it is a valid job name (a DNS-1123 label), else :func:`fail` saying why."""
    try:
        return job_name(value, where="--job")
    except JobNameError as exc:
        fail(str(exc))
    return value  # pragma: no cover - fail raises


def out_file(path: Path, option: str = "--out") -> Path:
    """``path`` if a file can be written there: not a folder, in an existing folder."""
    if path.is_dir():
        fail(f"{option} {path} is a folder; give a file path")
    if not path.parent.is_dir():
        fail(f"{option} {path}: folder {path.parent} does not exist (or is a file); create it first")
    return path


def out_dir(path: Path, option: str = "--out") -> Path:
    """``path`` if it is a folder or can become one (nothing in its way is a file)."""
    for p in (path, *path.parents):
        if p.exists() and not p.is_dir():
            fail(f"{option} {path}: {p} is a file, not a folder; give a folder path")
    return path


DEFAULT_VAR_DIR = Path("var")
DEMO_VAR_DIR = DEFAULT_VAR_DIR / "demo"
VAR_DIR_HELP = (
    "State folder (lake, models, decisions, reports). Default: $FLINKTUNE_VAR_DIR, else var/ when it holds "
    "state, else the demo's var/demo after `make demo`."
)


def has_state(folder: Path) -> bool:
    return any((folder / name).exists() for name in ("state", "lake", "twin"))


def state_dir(var_dir: Path | None) -> Path:
    """The state folder a step command works in: ``--var-dir``, ``$FLINKTUNE_VAR_DIR``, ``var/``, or the demo's folder.

    Refuses (before anything is written) when the folder is missing or holds no flinktune state.
    """
    from_env = worker_var_dir()
    if var_dir is None and from_env is not None:
        var_dir, option = from_env, "FLINKTUNE_VAR_DIR"
    elif var_dir is None:
        # After `make demo` the state lives in var/demo; var/ itself holds state once a pipeline ran there.
        if not has_state(DEFAULT_VAR_DIR) and (DEMO_VAR_DIR / DEMO_MARKER).exists():
            typer.secho(f"using the demo's state in {DEMO_VAR_DIR}/ (pass --var-dir to choose)", err=True)
            return DEMO_VAR_DIR
        var_dir, option = DEFAULT_VAR_DIR, "default"
    else:
        option = "--var-dir"
    if not var_dir.is_dir():
        fail(f"{option} {var_dir}: no such folder; run `make demo` first or pass --var-dir")
    if not has_state(var_dir):
        fail(f"{option} {var_dir}: holds no flinktune state (no state/, lake/ or twin/); run `make demo` first or pass --var-dir")
    return var_dir


def _snapshot(folder: Path) -> set[Path]:
    return {Path(root, name) for root, dirs, files in os.walk(folder) for name in (*dirs, *files)}


@contextlib.contextmanager
def nothing_left_on_refusal(folder: Path) -> Iterator[None]:
    """Run a step in ``folder``; when it refuses (missing input, bad value), remove what it created
    there (empty databases, folders) and end with a one-line error.

    Other errors go on to the error boundary (:mod:`flinktune.entry`) untouched: what a failing run
    wrote may be needed to find out why.
    """
    before = _snapshot(folder)
    try:
        yield
    except (FileNotFoundError, ValueError) as exc:
        for path in sorted(_snapshot(folder) - before, key=lambda p: len(p.parts), reverse=True):
            if path.is_dir() and not path.is_symlink():
                shutil.rmtree(path, ignore_errors=True)
            else:
                path.unlink(missing_ok=True)
        fail(str(exc))


def state_settings(folder: Path) -> dict[str, float]:
    """The settings a demo folder was made with (``latency_target_ms``), for ``load_settings`` overrides.

    Only where the environment does not set them: ``FLINKTUNE_LATENCY_TARGET_MS`` wins. Empty for any other folder."""
    import json

    path = folder / DEMO_SETTINGS
    if "FLINKTUNE_LATENCY_TARGET_MS" in os.environ or not path.is_file():
        return {}
    try:
        target = float(json.loads(path.read_text())["latency_target_ms"])
    except (OSError, ValueError, KeyError, TypeError):
        fail(f'{path}: not a demo settings file (expected {{"latency_target_ms": <ms>}}); remove it or fix it')
    return {"latency_target_ms": target}
