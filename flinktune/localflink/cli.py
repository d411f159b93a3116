"""Functions behind ``flinktune local-flink up|down|status`` (the Typer commands live in flinktune/cli/local_flink.py).

Each returns a JSON-serialisable dict and raises a clear error (``DistributionError``,
``PortTakenError``, ``ClusterError``) that the CLI prints without a traceback.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from flinktune.localflink.cluster import ClusterSpec, LocalFlinkCluster
from flinktune.localflink.distribution import find_distribution

__all__ = ["DEFAULT_STATE_DIR", "cli_down", "cli_status", "cli_up"]

#: Where the cluster keeps conf, logs, checkpoints and PIDs unless told otherwise.
DEFAULT_STATE_DIR = Path("var/localflink/cluster")


def cli_up(
    state_dir: Path = DEFAULT_STATE_DIR,
    *,
    rest_port: int = 8081,
    rpc_port: int = 6123,
    taskmanagers: int = 1,
    slots: int = 2,
    tm_memory_mb: int = 1536,
    flink_home: Path | None = None,
    timeout_s: float = 120.0,
) -> dict[str, Any]:
    """Start a session cluster on 127.0.0.1 and wait until its slots are registered."""
    spec = ClusterSpec(
        rest_port=rest_port, rpc_port=rpc_port, taskmanagers=taskmanagers, tm_slots=slots, tm_memory_mb=tm_memory_mb
    )
    return LocalFlinkCluster(state_dir, spec, dist=find_distribution(flink_home)).up(timeout_s=timeout_s)


def cli_down(state_dir: Path = DEFAULT_STATE_DIR) -> dict[str, Any]:
    """Stop every process of the cluster by PID; reports which PIDs were stopped."""
    return {"state_dir": str(Path(state_dir).resolve()), "stopped_pids": LocalFlinkCluster(state_dir).down()}


def cli_status(state_dir: Path = DEFAULT_STATE_DIR) -> dict[str, Any]:
    """PIDs, liveness and Flink's overview of the cluster."""
    return LocalFlinkCluster(state_dir).status()
