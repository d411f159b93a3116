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
        360.0, help="The profiler's recovery cap (with --group-by): a recovery at or above it did not recover."
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
        "operator,demeter",  # calibration.folder.REDEPLOY_METHODS, spelled out: importing it here would load the twin
        help="With --group-by: whose measured scale-downs (measured_60s file names) the redeploy is fitted on, "
        "several joined by commas and pooled; a method without files is left out.",
    ),
    strict: bool = typer.Option(
        False, help="Refuse a file with any row that fails the physical checks, instead of dropping the row with a line."
    ),
) -> None:
    """Fit the twin's parameters to profiling observations and report the held-out error.

    With ``--group-by``: the grey-box twin (mechanism + learned correction), scored leave-one-group-out;
    the mechanism goes to ``--out`` (YAML) and the whole twin beside it (``<out>.greybox.joblib``).
    When the observations sit in a folder in the demeter-ads format with a measured static run
    (``measured_60s/*baseline*.csv``), the twin's CPU per record is calibrated on its CPU load
    (``flinktune.calibration.cpu``); without one CPU stays uncalibrated and the output says so.
    Then, with measured reactive runs there (``measured_60s/*reactive*.csv``), the restart cost
    (warm-up, per-TaskManager restart time, pod start) is fitted on their rescales
    (``flinktune.calibration.restart``); without them it stays as it was and the output says so.
    With measured operator-autoscaler or Demeter runs (``measured_60s/*operator*.csv``, ``*demeter*.csv``),
    the warm-up after a savepoint redeploy and its downtime are fitted on the backlog after their
    scale-downs, pooled (``flinktune.calibration.redeploy_downtime``; ``--redeploy-fit`` for the other ways,
    ``--redeploy-methods`` for other methods).
    """
    from flinktune.calibration.mechanism import CalibrationError, calibrate, read_observations
    from flinktune.calibration.observation_checks import ObservationError
    from flinktune.quantities import RECOVERY_S, QuantityError, check, finite
    from flinktune.twin.profile import ClusterProfile, ProfileError

    try:
        check(RECOVERY_S, recovery_cap_s, "--recovery-cap-s")
        finite(holdout, "--holdout")
    except QuantityError as exc:
        fail(str(exc))
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
            strict,
        )
        return
    try:
        base = ClusterProfile.from_yaml(profile) if profile else ClusterProfile.default(workload.value)
        rows = _screened(read_observations(str(observations)), observations, strict)
        result = calibrate(rows, base, holdout=holdout, seed=seed, duration_s=duration_s)
        result.profile.to_yaml(out)
    except (CalibrationError, ProfileError, ObservationError) as exc:
        fail(str(exc))
    typer.echo(result.summary())
    typer.echo(
        json.dumps(
            {"profile": str(out), "params": result.params, "train": result.train, "holdout": result.holdout}, default=float
        )
    )


def _screened(df: Any, observations: Path, strict: bool) -> Any:
    """The rows of a profiling table that pass the physical checks; one line on stderr per dropped row."""
    from flinktune.calibration.observation_checks import screen_observations

    screened = screen_observations(df, str(observations), strict=strict)
    for line in (*screened.dropped, *screened.notes):
        typer.echo(line, err=True)
    return screened.rows


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
    strict: bool,
) -> None:
    import pandas as pd

    from flinktune.calibration import calibrate_folder
    from flinktune.calibration.grey_box_scores import cross_validate
    from flinktune.calibration.mechanism import CalibrationError
    from flinktune.calibration.observation_checks import ObservationError
    from flinktune.twin.profile import ClusterProfile, ProfileError

    fit_errors = (CalibrationError, ProfileError, ObservationError, pd.errors.ParserError, pd.errors.EmptyDataError)
    try:
        base = ClusterProfile.from_yaml(profile) if profile else ClusterProfile.default(workload.value)
        obs = _screened(pd.read_csv(observations), observations, strict)
        kwargs: dict[str, Any] = {"recovery_cap_s": cap, "duration_s": duration_s, "max_nfev": max_nfev}
        folds = cross_validate(obs, base, group_by=group_by, **kwargs)
        cal = calibrate_folder(
            observations.parent,
            obs.drop(columns=[group_by]),
            base,
            redeploy_fit=redeploy_fit,
            redeploy_methods=redeploy_methods,
            **kwargs,
        )
    except fit_errors as exc:
        fail(f"{observations}: {exc}" if str(observations) not in str(exc) else str(exc))
    except ValueError as exc:  # a measured file beside the observations, or the redeploy fit's name
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
    from flinktune.calibration.grey_box import GreyBoxTwin
    from flinktune.calibration.mechanism import CalibrationError, predict_table, read_observations
    from flinktune.signing import SignatureError
    from flinktune.twin.profile import ClusterProfile, ProfileError

    out = out_file(out) if out else None
    try:
        if grey_box:
            pred = GreyBoxTwin.load(grey_box).predict(read_observations(str(table)))
        else:
            prof = ClusterProfile.from_yaml(profile) if profile else ClusterProfile.default(workload.value)
            pred = predict_table(prof, read_observations(str(table)))
    except (CalibrationError, ProfileError, SignatureError) as exc:
        fail(str(exc))
    if out:
        pred.to_csv(out, index=False)
        typer.echo(str(out))
    else:
        typer.echo(pred.to_csv(index=False))
