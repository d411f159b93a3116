"""The robustness benchmark's scenario matrix: a CSV file of scenarios, their traces, transforms and perturbed profiles.

Use :func:`load_matrix` to read and check a matrix file (``benchmarks/robustness_matrix.csv``: one
scenario a line, ``#`` lines are comments), :func:`scenario_profile` for a scenario's cluster profile
(a shipped or YAML profile with its perturbations applied) and :func:`scenario_trace` for its
(history, replayed span, workload) on a seed. A trace is ``ads`` (``trace_x3.csv`` of the data
folder), ``ysb`` / ``tsw`` (the seeded generators) or a CSV path (relative to the data folder).
Transforms (``+``-joined, applied in order): ``compress:K`` plays the rate curve K times faster
(the values stay; ramps get K times steeper), ``scale:X`` multiplies every rate by X and
``flash:M:H:MIN`` multiplies the rate by M for MIN minutes from hour H of the replayed span (never
in the forecasters' history). Perturbations (``+``-joined): ``capacity:X`` (every vertex's
per-record cost divided by X: X < 1 is a slower job), ``base_latency:X`` (the idle pipeline's
latency times X), ``redeploy_warmup:S`` (S seconds of warm-up after a savepoint redeploy) and
``restart_cost:X`` (every time part of a failure's restart times X, see :data:`RESTART_FIELDS`).
Every error names the matrix file and line.
"""

from __future__ import annotations

import csv
import math
import re
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from flinktune.limits import MAX_RATE
from flinktune.policies import POLICY_NAMES
from flinktune.replay.policy_options import check_policy_options, parse_policy_options
from flinktune.replay.runner import SHIPPED_PROFILES, split_history
from flinktune.twin.profile import ClusterProfile
from flinktune.twin.workload import WORKLOADS, generate_trace, load_trace_csv

__all__ = [
    "COLUMNS",
    "RESTART_FIELDS",
    "MatrixError",
    "Scenario",
    "apply_perturbation",
    "apply_transforms",
    "load_matrix",
    "parse_perturbation",
    "parse_transform",
    "scenario_profile",
    "scenario_trace",
]

#: The matrix file's columns, in order (its first non-comment line is this header).
COLUMNS: tuple[str, ...] = (
    "scenario",
    "trace",
    "trace_transform",
    "profile",
    "perturbation",
    "latency_target_ms",
    "hours",
    "history_hours",
    "policy_options",
)

#: The real trace's file name inside the data folder (the demeter-ads format).
ADS_TRACE = "trace_x3.csv"

#: What ``restart_cost:X`` scales: the seconds a failure's restart takes (detection, restart, per
#: TaskManager, warm-up) times X and the restore bandwidth divided by X. The rescale and redeploy
#: warm-ups are pinned to their current values first, so a restart's cost changes and a
#: reconfiguration's does not.
RESTART_FIELDS: tuple[str, ...] = ("failure_detection_s", "restart_base_s", "restart_per_tm_s", "warmup_s")

_NAME = re.compile(r"^[A-Za-z0-9_.-]+$")
_TRANSFORMS = ("compress", "scale", "flash")
_PERTURBATIONS = ("capacity", "base_latency", "redeploy_warmup", "restart_cost")


class MatrixError(ValueError):
    """A matrix line cannot be used; the message starts with ``file:line``."""


@dataclass(frozen=True)
class Scenario:
    """One line of the matrix: what is replayed, on which profile, against which latency target."""

    name: str
    trace: str
    trace_transform: str
    profile: str
    perturbation: str
    latency_target_ms: float
    hours: float
    history_hours: float
    policy_options: dict[str, dict[str, float]] = field(default_factory=dict, hash=False)
    #: ``file:line`` of the row, for error messages.
    where: str = ""

    def settings(self) -> dict[str, Any]:
        """The row as plain values (what a stored result must match to be reused)."""
        return {c: getattr(self, c) for c in COLUMNS if c != "scenario"}


def _number(text: str, what: str, *, positive: bool = True) -> float:
    try:
        v = float(text)
    except ValueError:
        raise ValueError(f"{what} {text!r} is not a number") from None
    if not math.isfinite(v) or (v <= 0 if positive else v < 0):
        raise ValueError(f"{what} must be a finite number {'> 0' if positive else '>= 0'}, got {text!r}")
    return v


def parse_transform(text: str) -> list[tuple[str, tuple[float, ...]]]:
    """``"none"``, ``"compress:2"``, ``"scale:0.5"``, ``"flash:2:3:20"`` or several joined by ``+``
    as [(kind, numbers)]; ValueError naming the bad part."""
    out: list[tuple[str, tuple[float, ...]]] = []
    if text.strip() in ("", "none"):
        return out
    for part in text.split("+"):
        kind, _, rest = part.strip().partition(":")
        args = rest.split(":") if rest else []
        if kind not in _TRANSFORMS:
            raise ValueError(f"trace_transform {part!r}: unknown transform {kind!r}; known: none, {', '.join(_TRANSFORMS)}")
        want = 3 if kind == "flash" else 1
        if len(args) != want:
            form = "flash:<multiplier>:<start_h>:<minutes>" if kind == "flash" else f"{kind}:<factor>"
            raise ValueError(f"trace_transform {part!r}: expected {form}")
        nums: tuple[float, ...]
        if kind == "flash":
            nums = (
                _number(args[0], f"trace_transform {part!r}: multiplier"),
                _number(args[1], f"trace_transform {part!r}: start hour", positive=False),
                _number(args[2], f"trace_transform {part!r}: minutes"),
            )
        else:
            nums = (_number(args[0], f"trace_transform {part!r}: factor"),)
        out.append((kind, nums))
    return out


def parse_perturbation(text: str) -> list[tuple[str, float]]:
    """``"none"``, ``"capacity:0.7"``, ``"redeploy_warmup:600"``, ... or several joined by ``+`` as [(kind, value)]."""
    out: list[tuple[str, float]] = []
    if text.strip() in ("", "none"):
        return out
    for part in text.split("+"):
        kind, sep, value = part.strip().partition(":")
        if kind not in _PERTURBATIONS:
            raise ValueError(f"perturbation {part!r}: unknown perturbation {kind!r}; known: none, {', '.join(_PERTURBATIONS)}")
        if not sep or ":" in value:
            raise ValueError(f"perturbation {part!r}: expected {kind}:<number>")
        out.append((kind, _number(value, f"perturbation {part!r}: value", positive=kind != "redeploy_warmup")))
    return out


def apply_perturbation(profile: ClusterProfile, text: str) -> ClusterProfile:
    """``profile`` with the perturbations of ``text`` applied (module docstring); a validated copy."""
    for kind, x in parse_perturbation(text):
        if kind == "capacity":
            flow = profile.dataflow.model_dump()
            flow["vertices"] = [{**v, "cost_us": v["cost_us"] / x} for v in flow["vertices"]]
            profile = profile.with_(dataflow=flow)
        elif kind == "base_latency":
            profile = profile.with_(base_latency_ms=profile.base_latency_ms * x)
        elif kind == "redeploy_warmup":
            profile = profile.with_(redeploy_warmup_s=x)
        else:  # restart_cost
            pinned = {
                "rescale_warmup_s": profile.warmup_s if profile.rescale_warmup_s is None else profile.rescale_warmup_s,
                "redeploy_warmup_s": profile.warmup_s if profile.redeploy_warmup_s is None else profile.redeploy_warmup_s,
            }
            scaled = {f: getattr(profile, f) * x for f in RESTART_FIELDS}
            profile = profile.with_(**pinned, **scaled, restore_mb_s=profile.restore_mb_s / x)
    return profile


def apply_transforms(series: pd.Series, steps: list[tuple[str, tuple[float, ...]]], *, kinds: tuple[str, ...]) -> pd.Series:
    """``series`` (1 s steps) with the ``steps`` whose kind is in ``kinds`` applied, in order.

    ``flash`` counts its start hour from the series' first second (call it on the replayed span)."""
    values = series.to_numpy(dtype=float)
    index = series.index
    for kind, nums in steps:
        if kind not in kinds:
            continue
        if kind == "compress":
            k = nums[0]
            n = int(len(values) / k)
            # Second i of the compressed trace is second i*k of the original (interpolated between seconds).
            values = np.interp(np.arange(n) * k, np.arange(len(values)), values)
            index = pd.date_range(index[0], periods=n, freq="1s", name=index.name)
        elif kind == "scale":
            values = values * nums[0]
        else:  # flash
            mult, start_h, minutes = nums
            lo = int(round(start_h * 3600))
            hi = lo + int(round(minutes * 60))
            if hi > len(values):
                raise ValueError(
                    f"trace_transform flash: {minutes:g} min from hour {start_h:g} runs past the replayed "
                    f"{len(values) / 3600:g} h"
                )
            values = values.copy()
            values[lo:hi] *= mult
    if values.size and values.max() >= MAX_RATE:
        raise ValueError(f"trace_transform: the transformed trace reaches {values.max():g} rec/s, above {MAX_RATE:g}")
    return pd.Series(values, index=index, name=series.name)


def _compress_factor(steps: list[tuple[str, tuple[float, ...]]]) -> float:
    return float(np.prod([nums[0] for kind, nums in steps if kind == "compress"])) if steps else 1.0


def _split_line(raw: str) -> list[str]:
    return [c.strip() for c in next(csv.reader([raw]))]


def load_matrix(path: str | Path) -> list[Scenario]:
    """Every scenario of the matrix file, checked for form (names, kinds, numbers); MatrixError names ``file:line``.

    Whether the files exist and the transforms fit the trace is checked by :func:`scenario_profile`
    and :func:`scenario_trace` (they need the data folder)."""
    path = Path(path)
    try:
        lines = path.read_text().splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise MatrixError(f"{path}: cannot read the matrix: {exc}") from None
    header: list[str] | None = None
    out: list[Scenario] = []
    seen: dict[str, str] = {}
    for lineno, raw in enumerate(lines, start=1):
        where = f"{path}:{lineno}"
        if not raw.strip() or raw.lstrip().startswith("#"):
            continue
        cells = _split_line(raw)
        if header is None:
            if tuple(cells) != COLUMNS:
                raise MatrixError(f"{where}: expected the header {','.join(COLUMNS)}, got {raw.strip()!r}")
            header = cells
            continue
        if len(cells) != len(COLUMNS):
            raise MatrixError(f"{where}: expected {len(COLUMNS)} columns ({','.join(COLUMNS)}), got {len(cells)}")
        row = dict(zip(COLUMNS, cells))
        try:
            out.append(_scenario(row, where))
        except ValueError as exc:
            raise MatrixError(f"{where}: {exc}") from None
        name = out[-1].name
        if name in seen:
            raise MatrixError(f"{where}: scenario {name!r} is already defined at {seen[name]}")
        seen[name] = where
    if not out:
        raise MatrixError(f"{path}: no scenario (expected the header {','.join(COLUMNS)} and one line per scenario)")
    return out


def _scenario(row: dict[str, str], where: str) -> Scenario:
    name = row["scenario"]
    if not _NAME.match(name):
        raise ValueError(f"scenario name {name!r}: use letters, digits, '_', '.' and '-' only")
    trace = row["trace"]
    if trace != "ads" and trace not in WORKLOADS and not trace.endswith(".csv"):
        raise ValueError(f"trace {trace!r}: expected ads, {', '.join(WORKLOADS)} or a .csv path (relative to --data)")
    steps = parse_transform(row["trace_transform"])
    profile = row["profile"]
    if profile not in (*WORKLOADS, *SHIPPED_PROFILES) and not profile.endswith((".yaml", ".yml")):
        raise ValueError(
            f"profile {profile!r}: expected {', '.join([*WORKLOADS, *SHIPPED_PROFILES])} or a .yaml path (relative to --data)"
        )
    parse_perturbation(row["perturbation"])
    target = _number(row["latency_target_ms"], "latency_target_ms")
    hours = _number(row["hours"], "hours")
    history = _number(row["history_hours"], "history_hours", positive=False)
    if trace in WORKLOADS and history:
        raise ValueError(
            f"history_hours {row['history_hours']!r}: a generator ({trace}) fits its forecasters on a preceding "
            "generated day; write 0"
        )
    for kind, nums in steps:
        if kind == "flash" and nums[1] * 3600 + nums[2] * 60 > hours * 3600:
            raise ValueError(f"trace_transform flash: {nums[2]:g} min from hour {nums[1]:g} runs past the {hours:g} h replayed")
    options = parse_policy_options([o for o in row["policy_options"].split(";") if o.strip()])
    check_policy_options(options, POLICY_NAMES)
    return Scenario(
        name,
        trace,
        row["trace_transform"] or "none",
        profile,
        row["perturbation"] or "none",
        target,
        hours,
        history,
        options,
        where,
    )


def _data_path(text: str, data: Path) -> Path:
    p = Path(text)
    return p if p.is_absolute() else data / p


def scenario_profile(sc: Scenario, data: str | Path, profile_ads: str | Path | None = None) -> ClusterProfile:
    """The scenario's cluster profile: ``ysb`` / ``tsw`` built in, ``ads`` (``profile_ads`` when given,
    else the shipped calibration) or a YAML path relative to ``data``; then its perturbations."""
    try:
        if sc.profile in WORKLOADS:
            base = ClusterProfile.default(sc.profile)
        elif sc.profile in SHIPPED_PROFILES:
            base = ClusterProfile.from_yaml(profile_ads if profile_ads is not None else SHIPPED_PROFILES[sc.profile])
        else:
            path = _data_path(sc.profile, Path(data))
            if not path.exists():
                raise ValueError(f"profile {sc.profile!r}: {path} does not exist")
            base = ClusterProfile.from_yaml(path)
        return apply_perturbation(base, sc.perturbation)
    except ValueError as exc:
        raise MatrixError(f"{sc.where}: {exc}") from None


@lru_cache(maxsize=4)
def _trace_file(path: Path) -> pd.Series:
    return load_trace_csv(path)


def trace_path(sc: Scenario, data: str | Path) -> Path | None:
    """The trace file a scenario replays (None for a generator)."""
    if sc.trace in WORKLOADS:
        return None
    return Path(data) / ADS_TRACE if sc.trace == "ads" else _data_path(sc.trace, Path(data))


def scenario_trace(sc: Scenario, data: str | Path, seed: int) -> tuple[pd.Series | None, pd.Series, str]:
    """(history, replayed span, workload) of a scenario on ``seed``, transforms applied.

    A trace file: compress and scale act on the whole file, which is then cut to ``history_hours``
    + ``hours`` and split; a generator: ``hours`` (times the compression) are generated on ``seed``
    and, when transformed, a preceding day (seed + 1000, as the replay harness draws it) gets the
    same compress and scale as the forecasters' history. Flash crowds act on the replayed span."""
    try:
        steps = parse_transform(sc.trace_transform)
        k = _compress_factor(steps)
        path = trace_path(sc, data)
        if path is None:
            series = apply_transforms(generate_trace(sc.trace, sc.hours * k, seed), steps, kinds=("compress", "scale"))
            series = series.iloc[: int(round(sc.hours * 3600))]
            history: pd.Series | None = None
            workload = sc.trace
            if steps:
                day = generate_trace(sc.trace, 24.0 * k, seed + 1000)
                day = apply_transforms(day, steps, kinds=("compress", "scale"))
                day.index = pd.date_range(end=series.index[0] - pd.Timedelta(seconds=1), periods=len(day), freq="1s", name="ts")
                history = day
        else:
            if not path.exists():
                raise ValueError(f"trace {sc.trace!r}: {path} does not exist")
            full = apply_transforms(_trace_file(path), steps, kinds=("compress", "scale"))
            need = sc.hours + sc.history_hours
            if len(full) < need * 3600:
                raise ValueError(
                    f"trace {sc.trace!r} ({sc.trace_transform}): {len(full) / 3600:.2f} h after the transforms, "
                    f"the row needs history_hours + hours = {need:g} h"
                )
            full = full[full.index < full.index[0] + pd.Timedelta(hours=need)]
            history, series = split_history(full, sc.history_hours)
            workload = "ysb"  # a trace file's dataflow comes from the profile (as flinktune replay does)
        series = apply_transforms(series, steps, kinds=("flash",))
        return history, series, workload
    except ValueError as exc:
        raise MatrixError(f"{sc.where}: {exc}") from None
