"""``flinktune twin calibrate|predict``: fit the twin to profiling observations, predict with it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import typer

from flinktune.cli.options import Workload, fail, out_file

__all__ = ["twin_app"]

twin_app = typer.Typer(
    add_completion=False, no_args_is_help=True, help="The twin: calibrate it from observations, predict with it."
)


@twin_app.command("calibrate")
def twin_calibrate(
    observations: Path = typer.Option(
        ...,
        exists=True,
        dir_okay=False,
        help="CSV of profiling runs (parallelism, task_slots, cpu, memory_mb, checkpoint_interval_s, input_rate, throughput, latency_ms, recovery_s).",
    ),
    out: Path = typer.Option(..., help="Where to write the calibrated cluster profile (YAML)."),
    profile: Path | None = typer.Option(None, exists=True, dir_okay=False, help="Starting profile (default: the built-in one)."),
    workload: Workload = typer.Option(Workload.ysb, help="Built-in job shape of the starting profile (without --profile)."),
    holdout: float = typer.Option(0.25, min=0.0, max=0.9, help="Share of runs held out to score the fit."),
    seed: int = typer.Option(0, help="Seed of the held-out split."),
    duration_s: int = typer.Option(300, min=30, help="Length of the profiling runs, seconds."),
    group_by: str | None = typer.Option(
        None, help="Column naming each real run (e.g. run): fit the grey-box twin and score it leave-one-group-out."
    ),
    recovery_cap_s: float = typer.Option(
        360.0, min=1.0, help="The profiler's recovery cap (with --group-by): a recovery at or above it did not recover."
    ),
    max_nfev: int = typer.Option(
        60, min=1, help="Model evaluations per mechanism-fit stage (with --group-by; lower: faster, coarser)."
    ),
    redeploy_fit: str = typer.Option(
        "backlog",
        help="With --group-by and measured operator runs: backlog (the redeploy's downtime and warm-up on the backlog "
        "after their scale-downs), downtime (the downtime on it, the warm-up on their latency) or latency (the "
        "warm-up alone, on their latency).",
    ),
    redeploy_methods: str = typer.Option(
        "operator,demeter",  # folder_calibration.REDEPLOY_METHODS, spelled out: importing it here would load the twin
        help="With --group-by: whose measured scale-downs (measured_60s file names) the redeploy is fitted on, "
        "several joined by commas and pooled; a method without files is left out.",
    ),
) -> None:
    """Fit the twin's parameters to profiling observations and report the held-out error.

    With ``--group-by``: the grey-box twin (mechanism + learned correction), scored leave-one-group-out;
    the mechanism goes to ``--out`` (YAML) and the whole twin beside it (``<out>.greybox.joblib``).
    When the observations sit in a folder in the demeter-ads format with a measured static run
    (``measured_60s/*baseline*.csv``), the twin's CPU per record is calibrated on its CPU load
    (``flinktune.twin.cpu_calibration``); without one CPU stays uncalibrated and the output says so.
    Then, with measured reactive runs there (``measured_60s/*reactive*.csv``), the restart cost
    (warm-up, per-TaskManager restart time, pod start) is fitted on their rescales
    (``flinktune.twin.restart_calibration``); without them it stays as it was and the output says so.
    With measured operator-autoscaler or Demeter runs (``measured_60s/*operator*.csv``, ``*demeter*.csv``),
    the warm-up after a savepoint redeploy and its downtime are fitted on the backlog after their
    scale-downs, pooled (``flinktune.twin.redeploy_downtime``; ``--redeploy-fit`` for the other ways,
    ``--redeploy-methods`` for other methods).
    """
    from flinktune.twin.calibration import CalibrationError, calibrate, read_observations
    from flinktune.twin.profile import ClusterProfile, ProfileError

    out = out_file(out)
    if group_by:
        _twin_calibrate_grey_box(
            observations,
            out,
            profile,
            workload,
            group_by,
            recovery_cap_s,
            duration_s,
            max_nfev,
            redeploy_fit,
            redeploy_methods,
        )
        return
    try:
        base = ClusterProfile.from_yaml(profile) if profile else ClusterProfile.default(workload.value)
        result = calibrate(read_observations(str(observations)), base, holdout=holdout, seed=seed, duration_s=duration_s)
        result.profile.to_yaml(out)
    except (CalibrationError, ProfileError) as exc:
        fail(str(exc))
    typer.echo(result.summary())
    typer.echo(
        json.dumps(
            {"profile": str(out), "params": result.params, "train": result.train, "holdout": result.holdout}, default=float
        )
    )


def _twin_calibrate_grey_box(
    observations: Path,
    out: Path,
    profile: Path | None,
    workload: Workload,
    group_by: str,
    cap: float,
    duration_s: int,
    max_nfev: int,
    redeploy_fit: str,
    redeploy_methods: str,
) -> None:
    import pandas as pd

    from flinktune.config_space import space_from_runs
    from flinktune.twin.calibration import CalibrationError
    from flinktune.twin.folder_calibration import calibrate_beside
    from flinktune.twin.grey_box import fit_grey_box
    from flinktune.twin.grey_box_scores import cross_validate
    from flinktune.twin.profile import ClusterProfile, ProfileError

    try:
        base = ClusterProfile.from_yaml(profile) if profile else ClusterProfile.default(workload.value)
        obs = pd.read_csv(observations)
        kwargs: dict[str, Any] = {"recovery_cap_s": cap, "duration_s": duration_s, "max_nfev": max_nfev}
        folds = cross_validate(obs, base, group_by=group_by, **kwargs)
        runs = obs.drop(columns=[group_by])
        twin = fit_grey_box(runs, base, **kwargs)
    except (CalibrationError, ProfileError, pd.errors.ParserError, pd.errors.EmptyDataError) as exc:
        fail(f"{observations}: {exc}" if str(observations) not in str(exc) else str(exc))
    try:
        maximum = space_from_runs(obs).maximum
        cal = calibrate_beside(
            observations.parent,
            twin,
            runs,
            base,
            maximum,
            redeploy_fit=redeploy_fit,
            redeploy_methods=redeploy_methods,
            **kwargs,
        )
    except ValueError as exc:
        fail(str(exc))
    twin = cal.twin
    labels = {"restart": "restart cost: ", "downtime": "redeploy downtime: ", "redeploy": "redeploy warm-up: ", "cpu": ""}
    twin.notes.extend(labels[term] + note for term, note in cal.notes.items())
    twin.profile.to_yaml(out)
    whole = twin.save(Path(f"{out}.greybox.joblib"))
    typer.echo(folds.round(4).to_string(index=False))
    mean = folds.drop(columns=[group_by]).mean().to_dict()
    typer.echo(
        json.dumps(
            {"profile": str(out), "grey_box": str(whole), "params": twin.params, "leave_one_out_mean": mean, "notes": twin.notes},
            default=float,
        )
    )


@twin_app.command("predict")
def twin_predict(
    table: Path = typer.Option(
        ..., "--input", exists=True, dir_okay=False, help="CSV of configurations and rates (knob columns + input_rate)."
    ),
    profile: Path | None = typer.Option(None, exists=True, dir_okay=False, help="Cluster profile (default: the built-in one)."),
    workload: Workload = typer.Option(Workload.ysb, help="Built-in job shape (without --profile)."),
    out: Path | None = typer.Option(None, help="Write the predictions here (CSV) instead of printing them."),
    grey_box: Path | None = typer.Option(
        None,
        exists=True,
        dir_okay=False,
        help="A grey-box twin (<profile>.greybox.joblib from calibrate --group-by): mechanism + correction with uncertainty.",
    ),
) -> None:
    """Predict throughput, p95 latency, recovery time and CPU for each row."""
    from flinktune.twin.calibration import CalibrationError, predict_table, read_observations
    from flinktune.twin.grey_box import GreyBoxTwin
    from flinktune.twin.profile import ClusterProfile, ProfileError

    out = out_file(out) if out else None
    try:
        if grey_box:
            pred = GreyBoxTwin.load(grey_box).predict(read_observations(str(table)))
        else:
            prof = ClusterProfile.from_yaml(profile) if profile else ClusterProfile.default(workload.value)
            pred = predict_table(prof, read_observations(str(table)))
    except (CalibrationError, ProfileError) as exc:
        fail(str(exc))
    if out:
        pred.to_csv(out, index=False)
        typer.echo(str(out))
    else:
        typer.echo(pred.to_csv(index=False))
