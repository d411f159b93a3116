"""The ``flinktune`` command line: the app, its commands and the console entry.

``flinktune demo`` runs the whole pipeline on the embedded default (twin, local Spark, SQLite
MLflow, in-process Airflow) and prints the report's path; ``flinktune decide`` and
``flinktune report`` run single steps against an existing state directory. The commands live by
concept: :mod:`~flinktune.cli.pipeline` (demo and the steps), :mod:`~flinktune.cli.twin`,
:mod:`~flinktune.cli.local_flink`, :mod:`~flinktune.cli.fleet`, :mod:`~flinktune.cli.rehearse` (the
production rehearsal), :mod:`~flinktune.cli.ui` (the UIs over a state folder); what they share is in
:mod:`~flinktune.cli.options`.
"""

from __future__ import annotations

import os

import typer

from flinktune.cli import pipeline
from flinktune.cli.fleet import fleet_app
from flinktune.cli.local_flink import local_app
from flinktune.cli.rehearse import rehearse
from flinktune.cli.twin import twin_app
from flinktune.cli.ui import ui
from flinktune.entry import BoundaryGroup

__all__ = ["app", "main"]

app = typer.Typer(
    cls=BoundaryGroup, add_completion=False, no_args_is_help=True, help="Keep Flink jobs near their cheapest safe configuration."
)


@app.callback()
def _root(
    ctx: typer.Context, debug: bool = typer.Option(False, "--debug", help="Show the traceback of an unexpected error.")
) -> None:
    """Keep Flink jobs near their cheapest safe configuration."""
    # An error in any subcommand is one line and exit code 2 (flinktune.entry); --debug keeps tracebacks.
    ctx.meta["flinktune.debug"] = debug


for command in pipeline.COMMANDS:
    app.command()(command)
app.command()(rehearse)
app.command()(ui)
app.add_typer(twin_app, name="twin")
app.add_typer(local_app, name="local-flink")
app.add_typer(fleet_app, name="fleet")


def main() -> None:  # pragma: no cover - console entry
    os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    app()


if __name__ == "__main__":  # pragma: no cover
    main()
