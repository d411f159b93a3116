"""``flinktune ui``: the Airflow UI with the flinktune page and the MLflow UI over a state folder, until Ctrl-C.

What is started is :mod:`flinktune.airflow_local.ui`; each server runs in a session of its own and
is stopped by its process group (:class:`flinktune.rehearsal.servers.Stack`).
"""

from __future__ import annotations

import signal
import time
from pathlib import Path

import typer

from flinktune.cli.options import VAR_DIR_HELP, fail, state_dir

__all__ = ["ui"]


def _port(value: int, option: str) -> int:
    """``value``, or a free port for 0; refuses a port something already listens on."""
    from flinktune.rehearsal.servers import free_port, tcp_open

    if value == 0:
        return free_port()
    if tcp_open(value):
        fail(f"{option} {value}: something already listens on 127.0.0.1:{value}; stop it or pass another port (0: any free one)")
    return value


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt  # SIGTERM stops the servers as Ctrl-C does


def ui(
    var_dir: Path | None = typer.Option(None, help=VAR_DIR_HELP),
    airflow_port: int = typer.Option(8080, min=0, max=65535, help="Port of the Airflow UI on 127.0.0.1 (0: any free one)."),
    mlflow_port: int = typer.Option(5000, min=0, max=65535, help="Port of the MLflow UI on 127.0.0.1 (0: any free one)."),
    timeout_s: float = typer.Option(300.0, min=10.0, help="How long each server may take to start, s."),
) -> None:
    """Show a state folder (default: the demo's) in the Airflow UI, with the flinktune page, and the MLflow UI.

    Both listen on 127.0.0.1 only; the URLs and the login are printed once both answer. Ctrl-C stops both.
    """
    folder = state_dir(var_dir).resolve()
    a_port, m_port = _port(airflow_port, "--airflow-port"), _port(mlflow_port, "--mlflow-port")
    if a_port == m_port:
        fail(f"--airflow-port and --mlflow-port are both {a_port}; give two ports")
    from flinktune.airflow_local.airflow_home import AirflowHomeError, prepare_airflow_home
    from flinktune.airflow_local.ui import UI_USER, read_login, ui_servers
    from flinktune.rehearsal.servers import Stack, StackError, http_ok

    typer.echo(f"state folder {folder}; starting the Airflow API server and the MLflow UI (about a minute) ...")
    try:
        prepare_airflow_home(folder)  # the demo's home is ready already; a folder without one gets it once
    except AirflowHomeError as exc:
        fail(str(exc))
    from models.store_home import follow_home

    follow_home(f"sqlite:///{folder / 'mlflow' / 'mlflow.db'}")  # a copied folder shows its own artifacts
    airflow, mlflow = ui_servers(folder, airflow_port=a_port, mlflow_port=m_port)
    # Ctrl-C even where a shell started this in the background with SIGINT ignored; SIGTERM alike.
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, _interrupt)
    try:
        with Stack(folder / "logs" / "ui", log=lambda line: typer.echo(f"  {line}")) as stack:
            started = [(s, stack.start(s.name, s.command, env=s.env)) for s in (airflow, mlflow)]  # both start at once
            for spec, server in started:
                stack.wait_ready(server, http_ok(spec.ready_url), timeout_s)
            deadline = time.monotonic() + 60
            while (password := read_login(folder)) is None and time.monotonic() < deadline:
                time.sleep(0.5)
            typer.echo(f"Airflow UI:     {airflow.url}  (login: {UI_USER} / {password or 'see the api-server log'})")
            typer.echo(f"flinktune page: {airflow.url}flinktune/")
            typer.echo(f"MLflow UI:      {mlflow.url}")
            typer.echo("Ctrl-C stops both.")
            while True:
                stack.check()
                time.sleep(1)
    except KeyboardInterrupt:
        typer.echo("stopped")
    except StackError as exc:
        fail(str(exc))
