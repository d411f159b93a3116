"""``flinktune fleet list``: the jobs flinktune manages, from a fleet file or labelled FlinkDeployments."""

from __future__ import annotations

import json
from pathlib import Path

import typer

from flinktune.cli.options import fail

__all__ = ["fleet_app"]

fleet_app = typer.Typer(
    add_completion=False, no_args_is_help=True, help="The jobs flinktune manages (a fleet file or labelled FlinkDeployments)."
)


@fleet_app.command("list")
def fleet_list(
    file: Path | None = typer.Option(
        None, "--file", help="A fleet.yaml (the twin's fleet; format in flinktune/fleet/registry.py)."
    ),
    kubernetes: bool = typer.Option(False, "--kubernetes", help="Discover FlinkDeployments labelled flinktune.io/managed=true."),
    namespace: str | None = typer.Option(None, help="With --kubernetes: one namespace (default: every namespace)."),
    as_json: bool = typer.Option(False, "--json", help="One JSON object per job instead of a table."),
) -> None:
    """Every job of the fleet, its settings, and whether it is managed or held (and why)."""
    from flinktune.fleet import FleetError, discover_flinkdeployments, load_fleet_file

    if (file is None) == (not kubernetes):
        fail("give exactly one of --file fleet.yaml or --kubernetes")
    if namespace is not None:
        from flinktune.quantities import QuantityError, dns_label

        try:
            dns_label(namespace, "--namespace")
        except QuantityError as exc:
            fail(str(exc))
    try:
        if file is not None:
            fleet = load_fleet_file(file)
        else:
            from flinktune.backends.cluster import kubernetes_api

            fleet = discover_flinkdeployments(kubernetes_api(), namespace)
    except FleetError as exc:
        fail(str(exc))
    rows = [
        {
            "job": e.name,
            "state": "managed" if e.managed else "held",
            **(e.settings.model_dump(exclude={"name"}) if e.settings else {}),
            "why": e.held or "",
        }
        for e in fleet.entries
    ]
    if as_json:
        for row in rows:
            typer.echo(json.dumps(row))
        return
    typer.echo(f"{'job':<24} {'state':<8} {'policy':<10} {'latency target':>14} {'recovery limit':>14} {'dry run':>7}  why")
    for e in fleet.entries:
        s = e.settings
        if s is None:
            typer.echo(f"{e.name:<24} {'held':<8} {'':<10} {'':>14} {'':>14} {'':>7}  {e.held}")
        else:
            typer.echo(
                f"{s.name:<24} {'managed':<8} {s.policy:<10} {s.latency_target_ms:>11,.0f} ms {s.recovery_limit_s:>12,.0f} s "
                f"{'yes' if s.dry_run else 'no':>7}"
            )
    typer.echo(f"{len(fleet.managed())} managed, {len(fleet.held())} held")
