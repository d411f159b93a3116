"""Surrogate promotion on held-out observations: the newest profiling observations of a job are held
out, the new version and the champion are both scored on them, and the better one is ``@champion``.

Use :func:`hold_out` in the surrogate's training job before it registers a version (a fit on the
older observations is scored on the newest :data:`HOLDOUT_SHARE`, at least :data:`MIN_HOLDOUT`,
by ``ts_ms``: the held-out metrics the run logs), then :func:`promote_on_holdout` once the version
is registered. The champion is re-scored on the same observations, so the comparison is fair
however many observations either was trained on; the new version wins when its held-out RMSE of
log p95 latency (:data:`METRIC`) is lower, when there is no champion, or when the champion was
trained for another configuration space or cannot score the held-out observations. A job with
fewer than ``MIN_HOLDOUT + MIN_TRAIN`` observations has no held-out set: a new version then
replaces only a champion that is missing or was trained for another space. The decision goes on
the version in words (:func:`models.registry.record_promotion`).
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from models import registry
from models.surrogate.pyfunc import SurrogatePyfunc
from models.surrogate.types import LOG_OUTCOMES, OUTCOMES, SurrogateDataWarning, SurrogateInputError

__all__ = [
    "DECIDING_OUTCOME",
    "HOLDOUT_SHARE",
    "METRIC",
    "MIN_HOLDOUT",
    "MIN_TRAIN",
    "HeldOut",
    "hold_out",
    "holdout_rmse",
    "promote_on_holdout",
]

#: Share of a job's observations held out, the newest first.
HOLDOUT_SHARE = 0.2
#: Fewest held-out observations (an RMSE over one or two points says little).
MIN_HOLDOUT = 3
#: Fewest older observations the scored fit is trained on.
MIN_TRAIN = 4
#: The outcome promotion decides on: the policy's first constraint is the latency target.
DECIDING_OUTCOME = "latency_ms"
#: The run metric (and the version's ``promotion_metric``) promotion compares.
METRIC = f"holdout_rmse.{DECIDING_OUTCOME}"
_LABEL = "held-out RMSE of log p95 latency"
#: The floor of log outcomes, as the surrogates' training data has it (models.surrogate.dataset).
_LOG_FLOOR = 1e-3

Fit = Callable[[np.ndarray, np.ndarray, np.ndarray], Any]


@dataclass(frozen=True)
class HeldOut:
    """The held-out observations of one job (raw knobs, ``rate``, outcomes) and the new version's scores on them.

    ``scores`` maps each outcome to the RMSE (model space: log for latency and recovery) of a fit on
    the older observations; empty, with ``problem`` saying why, when there is no held-out score.
    """

    job: str
    total: int
    frame: pd.DataFrame
    train_rows: int
    scores: dict[str, float] = field(default_factory=dict)
    problem: str = ""

    @property
    def rows(self) -> int:
        return len(self.frame)

    def where(self) -> str:
        """Which observations were held out, in words."""
        return f"the {self.rows} newest of {self.total} profiling observations of job {self.job}"

    def metrics(self) -> dict[str, float]:
        """The run metrics: ``holdout_rows`` and ``holdout_rmse.<outcome>``."""
        return {"holdout_rows": float(self.rows), **{f"holdout_rmse.{o}": v for o, v in self.scores.items()}}


def holdout_rmse(wrapper: Any, frame: pd.DataFrame, knobs: Sequence[str]) -> dict[str, float]:
    """RMSE per outcome (model space) of ``wrapper``'s predicted means on ``frame``'s observations.

    ``wrapper`` is a :class:`SurrogatePyfunc` (raw knob columns and ``rate`` in). Raises ValueError
    naming the outcome when a prediction is not finite or the deciding outcome has no usable row.
    """
    pred = wrapper.predict(None, frame[[*knobs, "rate"]])
    out = {}
    for outcome in OUTCOMES:
        y = frame[outcome].to_numpy("float64")
        ok = np.isfinite(y) & (y >= 0)
        if not ok.any():
            continue
        target = np.log(np.maximum(y[ok], _LOG_FLOOR)) if outcome in LOG_OUTCOMES else y[ok]
        mean = pred[f"{outcome}_mean"].to_numpy("float64")[ok]
        if not np.isfinite(mean).all():
            raise ValueError(f"its {outcome} prediction is not finite for {int((~np.isfinite(mean)).sum())} observation(s)")
        out[outcome] = float(np.sqrt(np.mean((target - mean) ** 2)))
    if DECIDING_OUTCOME not in out:
        raise ValueError(f"no held-out observation has a usable {DECIDING_OUTCOME}")
    return out


def _newest_last(kept: pd.DataFrame) -> np.ndarray:
    """Positions of ``kept`` oldest first: by ``ts_ms`` when the table has it, else in reading order."""
    if "ts_ms" in kept and kept["ts_ms"].notna().all():
        return np.argsort(kept["ts_ms"].to_numpy("int64"), kind="stable")
    return np.arange(len(kept))


def hold_out(
    df: pd.DataFrame,
    X: np.ndarray,
    rates: np.ndarray,
    Y: np.ndarray,
    *,
    job: str,
    knobs: Sequence[str],
    bounds: Sequence[tuple[float, float]],
    fit: Fit,
    share: float = HOLDOUT_SHARE,
) -> HeldOut:
    """Hold out the newest ``share`` of ``job``'s observations and score a ``fit`` on the older ones.

    ``df`` is the observation table (knob columns, ``input_rate``, the outcomes, ``ts_ms``); ``X``,
    ``rates`` and ``Y`` its rows with every knob set, as the training job fits on them (normalised
    knobs, rec/s, outcomes). ``fit(X, rates, Y)`` returns a fitted surrogate.
    """
    if not 0 < share < 1:
        raise ValueError(f"held-out share must be in (0, 1), got {share!r}")
    kept = df.loc[df[list(knobs)].notna().all(axis=1)]
    n = len(kept)
    if n != len(X):
        raise ValueError(f"hold_out: {n} observations with every knob set but {len(X)} rows of X")
    k = max(MIN_HOLDOUT, math.ceil(share * n))
    if n - k < MIN_TRAIN:
        empty = pd.DataFrame(columns=[*knobs, *OUTCOMES, "rate"])
        return HeldOut(job, n, empty, 0, problem=f"{n} observations are too few to hold out {k} and fit on {MIN_TRAIN} or more")
    order = _newest_last(kept)
    old, new = order[:-k], order[-k:]
    frame = kept.iloc[new][[*knobs, *OUTCOMES]].reset_index(drop=True)
    frame["rate"] = kept["input_rate"].to_numpy("float64")[new]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SurrogateDataWarning)  # the full fit already reported the same rows
        try:
            model = fit(X[old], rates[old], Y[old])
        except SurrogateInputError as exc:
            return HeldOut(job, n, frame, len(old), problem=f"a fit on the {len(old)} older observations failed: {exc}")
    wrapper = SurrogatePyfunc(knobs, bounds)
    wrapper.model = model
    try:
        scores = holdout_rmse(wrapper, frame, knobs)
    except ValueError as exc:
        return HeldOut(job, n, frame, len(old), problem=f"the fit on the {len(old)} older observations cannot score them: {exc}")
    return HeldOut(job, n, frame, len(old), scores)


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text.splitlines()[0][:200]}" if text else type(exc).__name__


def _space_of(wrapper: Any) -> tuple[list[str], list[tuple[float, float]]] | None:
    names, bounds = getattr(wrapper, "feature_names", None), getattr(wrapper, "bounds", None)
    if names is None or bounds is None:
        return None
    return list(names), [(float(lo), float(hi)) for lo, hi in bounds]


def _champion_verdict(
    name: str, current: str, held: HeldOut, knobs: Sequence[str], bounds: Sequence[tuple[float, float]]
) -> tuple[bool | None, str, float | None]:
    """(new version wins?, why, the champion's score): None for "cannot tell" (no held-out score)."""
    try:
        wrapper = registry.load_champion(name, unwrap=False)
    except registry.ModelStoreUnavailable:
        raise
    except Exception as exc:  # its files or its class no longer load: it cannot score anything
        return True, f"champion v{current} cannot be loaded to score {held.where()} ({_first_line(exc)})", None
    space = _space_of(wrapper)
    ours = (list(knobs), [(float(lo), float(hi)) for lo, hi in bounds])
    if space != ours:
        got = "no knob list" if space is None else ", ".join(f"{k} [{lo:g}, {hi:g}]" for k, (lo, hi) in zip(*space))
        return True, f"champion v{current} was trained for another configuration space ({got}), so it cannot score this one", None
    if not held.scores:
        return None, f"no held-out score ({held.problem})", None
    try:
        theirs = holdout_rmse(wrapper, held.frame, knobs)[DECIDING_OUTCOME]
    except Exception as exc:  # a champion that cannot predict the new observations cannot defend its place
        return True, f"champion v{current} cannot score {held.where()} ({_first_line(exc)})", None
    mine = held.scores[DECIDING_OUTCOME]
    return mine < theirs, f"{_LABEL} {mine:.3g} vs champion v{current} {theirs:.3g} on {held.where()}", theirs


def promote_on_holdout(
    name: str,
    version: str,
    held: HeldOut,
    *,
    knobs: Sequence[str],
    bounds: Sequence[tuple[float, float]],
    requirement: tuple[bool, str] | None = None,
    data: str = "",
) -> registry.Promotion:
    """Make ``version`` of ``name`` the champion when it predicts ``held``'s observations better (module doc).

    ``knobs`` and ``bounds`` are the configuration space the version was trained for;
    ``requirement`` an extra condition ``(met, what was checked)`` that must hold even without a
    champion; ``data`` ends the description (what the version was trained on).
    """
    current = registry.champion_version(name)
    if current == str(version):
        return registry.Promotion(False, f"v{version} already is the champion")
    theirs: float | None = None
    if current is None:
        wins, why = True, "no champion yet"
    else:
        verdict, why, theirs = _champion_verdict(name, current, held, knobs, bounds)
        wins = bool(verdict)
        if verdict is None:
            why = f"{why}; champion v{current} stays until one can be scored"
    if requirement is not None:
        met, what = requirement
        wins = wins and met
        why = f"{why}; {what}{'' if met else ' (not met)'}"
    words = _describe(wins, why, held, current, theirs, data)
    return registry.record_promotion(name, str(version), wins, why, metric=METRIC, description=words)


def _describe(wins: bool, why: str, held: HeldOut, current: str | None, theirs: float | None, data: str) -> str:
    """The version's description: the decision and how it was scored, in words."""
    head = ("Champion" if wins else f"Not promoted (challenger; version {current} stays champion)") + f": {why}."
    if theirs is not None:
        head += f" Lower is better; version {current} was re-scored on the same {held.rows} observations."
    if held.scores:
        others = ", ".join(f"{o} {v:.3g}" for o, v in held.scores.items() if o != DECIDING_OUTCOME)
        how = (
            f" Held out: {held.where()} (the newest {HOLDOUT_SHARE:.0%}, at least {MIN_HOLDOUT}); this version was "
            f"scored by a fit on the {held.train_rows} older ones, then refitted on all {held.total}. "
            f"Its held-out RMSE of the other outcomes (model space): {others}."
        )
    else:
        how = f" No held-out score: {held.problem}."
    return f"{head}{how} {data}".strip()
