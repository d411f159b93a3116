"""``flinktune fleet``: ``init`` writes a commented fleet.yaml, ``validate`` checks one, ``list`` shows the jobs
flinktune manages, from a fleet file or labelled FlinkDeployments (format: docs/fleet.md); ``act JOB`` /
``advise JOB`` switch a job's mode, recorded with who and when in the state store."""

from __future__ import annotations

import getpass
import json
from pathlib import Path

import typer

from flinktune.cli.options import VAR_DIR_HELP, checked_job, fail, state_dir

__all__ = ["fleet_app"]

fleet_app = typer.Typer(
    add_completion=False, no_args_is_help=True, help="The jobs flinktune manages (a fleet file or labelled FlinkDeployments)."
)


@fleet_app.command("list")
def fleet_list(
    file: Path | None = typer.Option(None, "--file", help="A fleet.yaml (the twin's fleet; format in docs/fleet.md)."),
    kubernetes: bool = typer.Option(False, "--kubernetes", help="Discover FlinkDeployments labelled flinktune.io/managed=true."),
    namespace: str | None = typer.Option(None, help="With --kubernetes: one namespace (default: every namespace)."),
    as_json: bool = typer.Option(False, "--json", help="One JSON object per job instead of a table."),
) -> None:
    """Every job of the fleet, its settings, and whether it is managed or held (and why)."""
    from flinktune.fleet import FleetError, discover_flinkdeployments, load_fleet_file

    if (file is None) == (not kubernetes):
        fail("give exactly one of --file fleet.yaml or --kubernetes")
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
    typer.echo(f"{'job':<24} {'state':<8} {'policy':<10} {'latency target':>14} {'recovery limit':>14} {'mode':>7}  why")
    for e in fleet.entries:
        s = e.settings
        if s is None:
            typer.echo(f"{e.name:<24} {'held':<8} {'':<10} {'':>14} {'':>14} {'':>7}  {e.held}")
        else:
            # An unset mode is advice unless `flinktune fleet act` recorded otherwise (the state store).
            typer.echo(
                f"{s.name:<24} {'managed':<8} {s.policy:<10} {s.latency_target_ms:>11,.0f} ms {s.recovery_limit_s:>12,.0f} s "
                f"{s.mode or '-':>7}"
            )
    typer.echo(f"{len(fleet.managed())} managed, {len(fleet.held())} held")


@fleet_app.command("init")
def fleet_init(
    path: Path = typer.Argument(Path("fleet.yaml"), help="Where to write the fleet file."),
    force: bool = typer.Option(False, "--force", help="Overwrite an existing file."),
) -> None:
    """Write a commented fleet.yaml: every setting with its meaning and default, and two example jobs."""
    from flinktune.cli.options import out_file
    from flinktune.fleet.template import fleet_template
    from flinktune.lake.atomic import atomic_write

    out_file(path, "PATH")
    if path.exists() and not force:
        fail(f"{path} exists; pass --force to overwrite it or give another path")
    atomic_write(path, fleet_template().encode())
    typer.echo(f"wrote {path}; edit the jobs, then `flinktune fleet validate {path}`")


@fleet_app.command("validate")
def fleet_validate(file: Path = typer.Argument(..., help="The fleet.yaml to check.")) -> None:
    """Check a fleet file: every job managed (exit 0), or each held job named with what is wrong (exit 2)."""
    import logging

    from flinktune.fleet import FleetError, load_fleet_file

    logging.getLogger("flinktune.fleet.registry").setLevel(logging.ERROR)  # each held job is shown below, once
    try:
        fleet = load_fleet_file(file)
    except FleetError as exc:
        fail(str(exc))
    if not fleet.entries:
        fail(f"{file}: 'jobs' is empty; add at least one job with a name")
    held = fleet.held()
    for entry in held:
        typer.secho(f"held {entry.name}: {entry.held}", fg=typer.colors.RED, err=True)
    if held:
        fail(f"{file}: {len(held)} of {len(fleet.entries)} jobs held; fix the settings named above")
    typer.echo(f"{file}: {len(fleet.entries)} jobs, all valid ({', '.join(e.name for e in fleet.entries)})")


def _switch(job: str, mode: str, by: str | None, var_dir: Path | None) -> None:
    from flinktune.decision.modes import resolve_mode
    from flinktune.decision.store import StateStoreError, open_state_store
    from flinktune.settings import load_settings

    job = checked_job(job)
    who = by if by is not None else getpass.getuser()
    settings = load_settings() if var_dir is None else load_settings(var_dir=var_dir)
    if not settings.state_url:  # the embedded SQLite store lives in a state folder that must exist already
        settings = load_settings(var_dir=state_dir(var_dir))
    try:
        store = open_state_store(settings)
        store.set_mode(job, mode, by=who)
    except (StateStoreError, ValueError) as exc:
        fail(str(exc))
    typer.echo(f"{job}: {resolve_mode(job, store.job_mode(job)).line()}")


_BY = typer.Option(None, "--by", help="Who switches (recorded with the time; default: the login name).")


@fleet_app.command("act")
def fleet_act(
    job: str = typer.Argument(..., help="The job to act on."),
    by: str | None = _BY,
    var_dir: Path | None = typer.Option(None, help=VAR_DIR_HELP),
) -> None:
    """Switch a job to act: its decisions are applied from the next scheduled run (a fleet setting mode: advise still wins)."""
    _switch(job, "act", by, var_dir)


@fleet_app.command("advise")
def fleet_advise(
    job: str = typer.Argument(..., help="The job to only advise on."),
    by: str | None = _BY,
    var_dir: Path | None = typer.Option(None, help=VAR_DIR_HELP),
) -> None:
    """Switch a job back to advice: decisions are recorded and shown, nothing is changed."""
    _switch(job, "advise", by, var_dir)
