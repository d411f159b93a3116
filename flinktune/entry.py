"""The error boundary of every entry point: the ``flinktune`` CLI and each ``python -m jobs.<name>``.

Use :func:`run_main` around a job's ``main`` and :class:`OneLineParser` for its arguments; the CLI
uses :class:`BoundaryGroup` as its click group. A known error (bad input, a missing file, a
refused value, a failed contract, an unreachable service: see :func:`is_known`) becomes ONE line
on stderr, ``error: <entry point>: <message>``, where the message names the input at fault and
the fix, and exit code 2. Anything else is a bug: one line and exit code 1, with the traceback
only behind ``--debug`` (then the exception propagates unchanged).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from typing import Any, NoReturn

import typer
from typer.core import TyperGroup

__all__ = ["BUG_EXIT", "KNOWN_EXIT", "BoundaryGroup", "OneLineParser", "is_known", "one_line", "run_main"]

KNOWN_EXIT = 2
BUG_EXIT = 1
#: Error classes of ours (and the Kubernetes client's) that derive from RuntimeError or Exception
#: but report a fault outside the code, named by class so this module imports none of them.
_KNOWN_NAMES = frozenset(
    {
        "ContractViolation",
        "ConfigException",
        "ExtractError",
        "ClusterError",
        "DistributionError",
        "RestError",
        "JobControlError",
        "RealizeError",
        "ProfilingError",
        "RegistryError",
        "SparkSubmitError",
        "DagRunError",
        "AirflowHomeError",
        "TrainerPodError",
        "ApiException",
        "MlflowException",
    }
)


def is_known(exc: BaseException) -> bool:
    """Input, file, service and contract errors: the user can act on the message alone."""
    if isinstance(exc, (ValueError, OSError, LookupError)):
        return True
    return any(cls.__name__ in _KNOWN_NAMES for cls in type(exc).__mro__)


def one_line(exc: BaseException) -> str:
    """The exception's message on one line (a multi-line message is joined with ``; ``)."""
    text = "; ".join(line.strip() for line in str(exc).splitlines() if line.strip())
    if isinstance(exc, KeyError) and len(exc.args) == 1:
        text = f"missing key {exc.args[0]!r}"
    return text or type(exc).__name__


def _report(prog: str, exc: BaseException) -> int:
    if is_known(exc):
        print(f"error: {prog}: {one_line(exc)}", file=sys.stderr)
        return KNOWN_EXIT
    print(
        f"error: {prog}: unexpected {type(exc).__name__}: {one_line(exc)} (a bug; rerun with --debug for the traceback)",
        file=sys.stderr,
    )
    return BUG_EXIT


class OneLineParser(argparse.ArgumentParser):
    """argparse with the usage error on one line (``error: <prog>: <what>; see --help``), exit 2,
    and a ``--debug`` flag that :func:`run_main` reads."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.add_argument("--debug", action="store_true", help="show the traceback of an unexpected error")

    def error(self, message: str) -> NoReturn:
        print(f"error: {self.prog}: {message}; see --help", file=sys.stderr)
        raise SystemExit(KNOWN_EXIT)


def run_main(prog: str, main: Callable[[list[str]], Any], argv: Sequence[str] | None = None) -> int:
    """Run ``main(argv)`` inside the boundary; returns the exit code (0 when ``main`` returns)."""
    args = list(sys.argv[1:] if argv is None else argv)
    try:
        main(args)
    except SystemExit as exc:  # argparse's --help and usage errors already said what they had to
        return exc.code if isinstance(exc.code, int) else KNOWN_EXIT
    except Exception as exc:
        if "--debug" in args:
            raise
        return _report(prog, exc)
    return 0


class BoundaryGroup(TyperGroup):
    """The CLI's click group: every subcommand runs inside the boundary; ``--debug`` on the root
    command (``flinktune --debug ...``) keeps tracebacks."""

    def invoke(self, ctx: Any) -> Any:  # click's Context (typer vendors click; its path is private)
        try:
            return super().invoke(ctx)
        except (typer.Exit, typer.Abort):
            raise
        except typer.TyperException as exc:  # click's own errors (typer vendors click)
            if getattr(exc, "ctx", None) is None:
                raise
            # A bad option of a subcommand: one line naming the command, not a usage box.
            text = exc.format_message() if hasattr(exc, "format_message") else str(exc)
            print(f"error: {exc.ctx.command_path}: {one_line(Exception(text))}", file=sys.stderr)  # type: ignore[attr-defined]  # checked non-None just above
            raise typer.Exit(KNOWN_EXIT) from None
        except Exception as exc:
            if ctx.meta.get("flinktune.debug"):
                raise
            raise typer.Exit(_report(ctx.command_path, exc)) from None
