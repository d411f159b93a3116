"""``flinktune local-flink up|down|status``: a standalone Flink cluster on 127.0.0.1 (functions in
:mod:`flinktune.localflink.cli`)."""

from __future__ import annotations

import json
from pathlib import Path

import typer

from flinktune.cli.options import DEFAULT_VAR_DIR, fail

__all__ = ["local_app"]

local_app = typer.Typer(
    add_completion=False, no_args_is_help=True, help="A standalone Flink cluster on 127.0.0.1 (bundled with apache-flink)."
)
_LOCAL_STATE_HELP = "State folder (config, logs, PIDs, checkpoints); default <var-dir>/localflink/cluster."


def _local_state(state_dir: Path | None, var_dir: Path) -> Path:
    return state_dir if state_dir is not None else var_dir / "localflink" / "cluster"


def _local(call, *args, **kwargs) -> None:
    from flinktune.localflink import ClusterError, DistributionError

    try:
        typer.echo(json.dumps(call(*args, **kwargs), indent=2, default=str))
    except (ClusterError, DistributionError) as exc:
        fail(str(exc))


@local_app.command("up")
def local_up(
    state_dir: Path | None = typer.Option(None, help=_LOCAL_STATE_HELP),
    var_dir: Path = typer.Option(DEFAULT_VAR_DIR, help="State folder of flinktune."),
    rest_port: int = typer.Option(8081, min=1024, max=65535),
    rpc_port: int = typer.Option(6123, min=1024, max=65535),
    taskmanagers: int = typer.Option(1, min=1, max=8),
    slots: int = typer.Option(2, min=1, max=8, help="Task slots per TaskManager."),
    tm_memory_mb: int = typer.Option(1536, min=768, help="Process memory per TaskManager, MB."),
    flink_home: Path | None = typer.Option(
        None, help="Flink distribution (default: the one in .venv-flink, see scripts/setup_local_flink.sh)."
    ),
) -> None:
    """Start the cluster and wait until its slots are registered."""
    from flinktune.localflink import cli_up

    _local(
        cli_up,
        _local_state(state_dir, var_dir),
        rest_port=rest_port,
        rpc_port=rpc_port,
        taskmanagers=taskmanagers,
        slots=slots,
        tm_memory_mb=tm_memory_mb,
        flink_home=flink_home,
    )


@local_app.command("down")
def local_down(
    state_dir: Path | None = typer.Option(None, help=_LOCAL_STATE_HELP),
    var_dir: Path = typer.Option(DEFAULT_VAR_DIR, help="State folder of flinktune."),
) -> None:
    """Stop every process of the cluster by PID."""
    from flinktune.localflink import cli_down

    _local(cli_down, _local_state(state_dir, var_dir))


@local_app.command("status")
def local_status(
    state_dir: Path | None = typer.Option(None, help=_LOCAL_STATE_HELP),
    var_dir: Path = typer.Option(DEFAULT_VAR_DIR, help="State folder of flinktune."),
) -> None:
    """PIDs, liveness and Flink's overview."""
    from flinktune.localflink import cli_status

    _local(cli_status, _local_state(state_dir, var_dir))
