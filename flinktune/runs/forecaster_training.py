"""Train the input-rate forecasters of one job, backtest them, register the best, promote it if it wins.

Use :func:`train_forecaster` (``python -m jobs.train_forecaster``, the train DAG), or its three steps:
:func:`select_forecaster` (backtest the candidates, choose one), :func:`register_forecaster` (log the
others, refit the chosen one on the whole history and register it) and :func:`promote_forecaster`
(champion/challenger against the current champion scored on the same spans).

Reads the curated ``features_1m`` dataset (``<lake>/curated/features_1m/job=<job>/**.parquet``,
columns ``window_start``, ``input_rate``) and holds out the latest ``holdout_frac`` of it as the
report window, and the span of half its length just before it as the selection span
(:func:`models.forecasting.backtest.backtest_select_then_report`, an origin every ``stride_bins``
minutes). Every candidate (the direct peak model, the darts peak models and their ensemble, TiDE,
Theta, seasonal naive, the Demeter ARIMA baseline, ...) is fitted on the data before the selection
span, chooses its backtest and peak rules there, is refitted on the data before the report window and scored on all of its origins,
then logged to MLflow with its params, metrics and a backtest plot. The best candidate is chosen
by the benchmark's champion rule (:func:`models.forecasting.champion.choose_champion`: lowest
peak MAE on the selection span among those whose under-forecast rate there is at most
``max_under_rate``), refit on the whole history and registered as a new version of
``flinktune-forecaster-<job>``, with its backtest and peak rules, its report and selection
metrics (``selection_*``) and the reason for the choice (tag ``champion_rule``).

The backtest rule (``backtest_rule``, a :func:`models.forecasting.planning.planned_rate` rule) is
how a candidate is scored: its under-forecast rate and over-provisioning are measured at it. No
policy plans with it: the flinktune policy plans at its own quantile, the same in the replay and
in the decide job, so it is recorded as a scoring detail, not tagged as a planning rule.

Champion/challenger: the current ``@champion`` is backtested on the SAME spans (its saved model
when it was trained before the selection span starts; otherwise, to avoid scoring it on data it has seen,
a fresh model with its params fitted on the same training part). The alias moves only when the
challenger's ``peak_mae`` is below the champion's by more than ``margin`` (relative) and its
under-forecast rate is acceptable (:func:`models.registry.promote`, the surrogate's path too); the
decision is written on the version as the tag ``promotion`` (a version not promoted becomes
``@challenger``). The version carries an input example (the latest history rows, ``ts`` in epoch ms
and ``value``, with ``horizon_s``) and the signature inferred from it and the model's forecast.
"""

from __future__ import annotations

import json
import logging
import math
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from flinktune.job_name import job_name
from flinktune.lake import Lake
from flinktune.runs.forecaster_candidates import CANDIDATES, DATASET, build_candidate, read_rate_history
from flinktune.runs.model_store import configure_store, pinned_requirements
from flinktune.settings import Settings, load_settings
from models.forecasting.base import ForecastingModel

__all__ = [
    "PROMOTION_METRIC",
    "Selection",
    "promote_forecaster",
    "register_forecaster",
    "score_champion",
    "select_forecaster",
    "train_forecaster",
]

log = logging.getLogger(__name__)

PROMOTION_METRIC = "peak_mae"


@dataclass
class Selection:
    """The candidates' backtests on one job's history and the one chosen (:func:`select_forecaster`)."""

    job: str
    series: pd.Series
    spans: dict[str, Any]
    models: dict[str, ForecastingModel]
    scores: dict[str, dict[str, Any]]
    figures: dict[str, Any]
    choice: Any
    skipped: list[str]
    holdout_frac: float
    select_refits: int

    @property
    def best(self) -> str:
        return str(self.choice.name)

    @property
    def model_name(self) -> str:
        return f"flinktune-forecaster-{self.job}"

    @property
    def tags(self) -> dict[str, str]:
        return {
            "job": self.job,
            "select_start": self.spans["select_start"].isoformat(),
            "window_start": self.spans["report_start"].isoformat(),
            "window_end": self.series.index[-1].isoformat(),
        }


def select_forecaster(
    *,
    job: str,
    settings: Settings,
    n_epochs: int = 20,
    holdout_frac: float = 0.25,
    seed: int = 0,
    candidates: tuple[str, ...] = CANDIDATES,
    max_under_rate: float = 0.05,
    stride_bins: int = 1,
    select_refits: int = 1,
) -> Selection:
    """Backtest ``candidates`` on ``job``'s curated history (select then report) and choose one by the
    benchmark's champion rule. ``select_refits`` > 1 chains forward over the selection span (a refit
    before each of that many parts: steadier rules on a long span, that many more fits per candidate)."""
    from models.forecasting.backtest import MIN_SELECT_ORIGINS, backtest_select_then_report
    from models.forecasting.champion import choose_champion
    from models.forecasting.peak_ensemble import ENSEMBLE_NAME, ensemble_backtest, member_candidates
    from models.forecasting.series_prep import prepare_rate_series
    from models.forecasting.types import ForecastInputError

    if not 0 < holdout_frac < 1:
        raise ValueError(f"holdout_frac must be in (0, 1), got {holdout_frac}")
    if not candidates:
        raise ValueError("candidates must name at least one forecaster")
    if select_refits < 1:
        raise ValueError(f"select_refits must be >= 1, got {select_refits}")
    horizon_s, bin_s = settings.forecast_horizon_s, settings.forecast_bin_s
    raw = read_rate_history(Lake(settings.lake_dir), job)  # type: ignore[arg-type]  # filled by the settings' validator
    where = f"dataset {DATASET} job={job} input_rate"
    models = {
        c: build_candidate(c, bin_s=bin_s, horizon_s=horizon_s, n_epochs=n_epochs, device=settings.device, seed=seed)
        for c in candidates
    }
    series = prepare_rate_series(raw, bin_s=bin_s, max_gap_bins=5, min_bins=1, where=where).values
    horizon_bins = math.ceil(horizon_s / bin_s)
    n_hold = max(3 * horizon_bins, int(len(series) * holdout_frac))
    # The rules are chosen on the span just before the report window, half as long (as the benchmark's 3 h before 6 h).
    n_select = max(n_hold // 2, horizon_bins + (MIN_SELECT_ORIGINS - 1) * stride_bins)
    n_first_fit = len(series) - n_hold - n_select
    if n_first_fit < 1:
        raise ForecastInputError(
            f"{where}: {len(series)} bins of {bin_s}s leave nothing to train on after holding out "
            f"{n_select} + {n_hold} bins to choose the rules and report the backtest"
        )
    # A candidate that needs more history than there is sits this round out (with a log line);
    # only when none can train is the history too short.
    fits = {c: m.min_fit_bins <= n_first_fit for c, m in models.items()}
    registrable_needs = [m.min_fit_bins for m in models.values() if m.registrable]
    if registrable_needs and not any(fits[c] for c, m in models.items() if m.registrable):
        need = min(registrable_needs)
        raise ForecastInputError(
            f"{where}: {len(series)} bins of {bin_s}s is too short to train ({need} bins) "
            f"and hold out {n_select} + {n_hold} bins to choose the rules and report the backtest"
        )
    for cand in [c for c, ok in fits.items() if not ok]:
        log.warning(
            "%s: candidate %s needs %d bins of history, %d available after the holdout; skipped this round",
            where,
            cand,
            models[cand].min_fit_bins,
            n_first_fit,
        )
    skipped = [c for c in candidates if not fits[c]]
    candidates = tuple(c for c in candidates if fits[c])
    models = {c: models[c] for c in candidates}
    spans = {
        "select_start": series.index[n_first_fit],
        "report_start": series.index[len(series) - n_hold],
        "horizon_s": horizon_s,
        "stride_bins": stride_bins,
        "select_refits": select_refits,
    }
    results: dict[str, Any] = {}
    scores: dict[str, dict[str, Any]] = {}
    figs: dict[str, Any] = {}
    backtests: dict[str, Any] = {}
    registrable = [c for c in candidates if models[c].registrable]  # seasonal naive is a yardstick only
    if not registrable:
        raise ValueError(f"candidates {list(candidates)}: none can be registered (all are yardsticks: registrable=False)")
    members = member_candidates()
    from_members = ENSEMBLE_NAME in models and all(m in models for m in members)
    for cand, model in models.items():
        if cand == ENSEMBLE_NAME and from_members:
            continue  # its members' backtests make its own (below): no second fit of each member
        backtests[cand] = backtest_select_then_report(model, series, max_under_rate=max_under_rate, **spans)
    if from_members:
        backtests[ENSEMBLE_NAME] = ensemble_backtest([backtests[m] for m in members], max_under_rate=max_under_rate)
    for cand in candidates:
        results[cand], scores[cand] = backtests[cand].report, backtests[cand].metrics
        figs[cand] = _plot(results[cand], scores[cand]["rule"])
    # The benchmark's rule (models.forecasting.champion): chosen on the selection span, so the report
    # metrics logged below stay out of sample.
    choice = choose_champion(backtests, max_under_rate=max_under_rate, registrable=registrable)
    for cand in candidates:
        scores[cand].update(
            {
                f"selection_{k}": v
                for k, v in choice.selection[cand].items()
                if isinstance(v, float) and math.isfinite(v) and k not in ("fit_s", "predict_ms")
            }
        )
    return Selection(job, series, spans, models, scores, figs, choice, skipped, holdout_frac, select_refits)


def score_champion(selection: Selection, settings: Settings, max_under_rate: float = 0.05) -> dict | None:
    """The current champion's metrics on the selection's spans (refit from its params when it saw
    them), None without a champion."""
    return _champion_on_window(selection.model_name, selection.series, selection.spans, settings, max_under_rate)


def register_forecaster(selection: Selection, settings: Settings, champion: dict | None) -> tuple[str, dict[str, float]]:
    """Log every candidate but the chosen one as a run, refit the chosen one on the whole history and
    register it as a new version of ``flinktune-forecaster-<job>`` (with ``champion``'s metrics as
    ``champion_*``); (its version, its metrics). Closes the selection's figures."""
    import matplotlib.pyplot as plt
    from mlflow.models import infer_signature

    from models import registry
    from models.forecasting.pyfunc import ForecasterPyfunc

    name, job, best, scores, series = selection.model_name, selection.job, selection.best, selection.scores, selection.series
    horizon_s = settings.forecast_horizon_s
    lake = Lake(settings.lake_dir)  # type: ignore[arg-type]  # filled by the settings' validator
    experiment_id = registry.ensure_experiment(name)
    for cand, model in selection.models.items():
        if cand != best:
            _log_candidate(experiment_id, cand, model, scores[cand], selection.figures[cand], selection.tags)
    model = selection.models[best]
    t0 = time.perf_counter()
    model.fit(series)  # the registered model sees the whole history
    metrics = {k: v for k, v in scores[best].items() if isinstance(v, float)}
    metrics["refit_s"] = time.perf_counter() - t0
    metrics["train_bins"] = float(len(series))
    if champion is not None:
        metrics.update({f"champion_{k}": v for k, v in champion.items() if isinstance(v, float)})
    history = series.iloc[-max(model.predict_bins, 240) :]
    example = pd.DataFrame({"ts": history.index.as_unit("ns").asi8 // 10**6, "value": history.to_numpy()})
    signature = infer_signature(example, model.predict(series, horizon_s).to_frame(), params={"horizon_s": horizon_s})
    with tempfile.TemporaryDirectory(prefix="flinktune-forecaster-") as tmp:
        model_dir = model.save(Path(tmp) / "model")
        version = registry.log_and_register(
            name,
            ForecasterPyfunc(horizon_s=horizon_s),
            params={
                "job": job,
                "candidate": best,
                "model": model.name,
                **model.params(),
                "horizon_s": horizon_s,
                "holdout_frac": selection.holdout_frac,
                "select_refits": selection.select_refits,
                "backtest_rule": scores[best]["rule"],
                "peak_rule": scores[best]["peak_rule"],
                "history_start": series.index[0].isoformat(),
                "history_end": series.index[-1].isoformat(),
            },
            metrics=metrics,
            artifacts={"model": str(model_dir)},
            files={"backtest": selection.figures[best]},
            experiment=name,
            pip_requirements=pinned_requirements("mlflow", "darts", "torch", "pmdarima", "scikit-learn"),
            tags={
                **selection.tags,
                "backtest_rule": scores[best]["rule"],
                "peak_rule": scores[best]["peak_rule"],
                "role": "challenger",
                "champion_rule": selection.choice.reason,
            },
            signature=signature,
            input_example=(example, {"horizon_s": horizon_s}),
            logged_model_name=f"forecaster-{job}-{best}",
            training_data=registry.lake_dataset(
                pd.DataFrame({"window_start": series.index, "input_rate": series.to_numpy()}),
                source=lake.curated_job_dir(DATASET, job),
                name=f"{DATASET}-{job}",
            ),
        )
    for fig in selection.figures.values():
        plt.close(fig)
    return version, metrics


def promote_forecaster(
    selection: Selection, version: str, champion: dict | None, *, margin: float = 0.05, max_under_rate: float = 0.05
) -> Any:
    """Make ``version`` the champion when its ``peak_mae`` is below ``(1 - margin)`` x the champion's on
    the same window and its under-forecast rate is acceptable (:func:`models.registry.promote`)."""
    from models import registry

    best, scores, spans = selection.best, selection.scores, selection.spans
    requirement = None
    if champion is not None:
        safe_enough = scores[best]["under_rate"] <= max(max_under_rate, champion["under_rate"])
        requirement = (safe_enough, f"under_rate {scores[best]['under_rate']:.3g} vs {champion['under_rate']:.3g}")
    return registry.promote(
        selection.model_name,
        version,
        PROMOTION_METRIC,
        challenger=scores[best][PROMOTION_METRIC],
        incumbent=None if champion is None else champion[PROMOTION_METRIC],
        margin=margin,
        relative=True,
        requirement=requirement,
        context=f"same window from {spans['report_start'].isoformat()}",
        data=f"It is the {best} forecaster, chosen among {len(scores)} candidates ({selection.choice.reason}), on the per-minute "
        f"input rate of job {selection.job} (features_1m-{selection.job}); champion and challenger were scored on the same "
        "backtest window.",
    )


def train_forecaster(
    *,
    job: str,
    settings: Settings | None = None,
    n_epochs: int = 20,
    holdout_frac: float = 0.25,
    seed: int = 0,
    candidates: tuple[str, ...] = CANDIDATES,
    margin: float = 0.05,
    max_under_rate: float = 0.05,
    stride_bins: int = 1,
    select_refits: int = 1,
) -> dict:
    """Select, register and promote ``flinktune-forecaster-<job>``; see the module docstring.

    ``margin`` is relative: the challenger's ``peak_mae`` must be below ``(1 - margin)`` x the
    champion's on the same window. Returns ``{model_name, version, promoted, champion, best,
    backtest_rule, peak_rule, promotion, metrics, champion_metrics, candidates: {name: metrics}}``.
    """
    from models import registry

    if not 0 <= margin < 1:
        raise ValueError(f"margin must be in [0, 1), got {margin}")
    job = job_name(job)  # before it reaches any path, model name or API call
    settings = settings or load_settings()
    selection = select_forecaster(
        job=job,
        settings=settings,
        n_epochs=n_epochs,
        holdout_frac=holdout_frac,
        seed=seed,
        candidates=candidates,
        max_under_rate=max_under_rate,
        stride_bins=stride_bins,
        select_refits=select_refits,
    )
    configure_store(settings)
    champion = score_champion(selection, settings, max_under_rate)
    version, metrics = register_forecaster(selection, settings, champion)
    promotion = promote_forecaster(selection, version, champion, margin=margin, max_under_rate=max_under_rate)
    best, scores, spans = selection.best, selection.scores, selection.spans
    return {
        "model_name": selection.model_name,
        "version": version,
        "promoted": promotion.promoted,
        "promotion": promotion.reason,
        "champion": registry.champion_version(selection.model_name),
        "best": best,
        "best_reason": selection.choice.reason,
        "select_start": spans["select_start"].isoformat(),
        "report_start": spans["report_start"].isoformat(),
        "backtest_rule": scores[best]["rule"],
        "peak_rule": scores[best]["peak_rule"],
        "metrics": metrics,
        "champion_metrics": champion,
        "candidates": scores,
        "skipped": selection.skipped,
    }


def _plot(result: Any, rule: str):
    """Truth, forecast mean and planned rate every ``horizon`` (non-overlapping origins) over the window."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from models.forecasting.planning import planned_rate

    window = result.window
    truth = window.series[window.series.index >= window.origins[0]]
    fig, ax = plt.subplots(figsize=(10, 3.5))
    ax.plot(truth.index, truth.to_numpy(), lw=0.8, color="black", label="input rate")
    every = max(1, window.horizon_bins // window.stride_bins)
    for k, fc in enumerate(result.forecasts[::every]):
        frame = fc.to_frame()
        ax.plot(frame["bin_start"], frame["mean"], color="tab:blue", lw=1, label="forecast mean" if k == 0 else None)
        ax.hlines(
            planned_rate(fc, rule),
            frame["bin_start"].iloc[0],
            frame["bin_start"].iloc[-1],
            color="tab:red",
            lw=1,
            label=f"planned ({rule})" if k == 0 else "_nolegend_",
        )
    ax.set_title(f"{result.model}: backtest")
    ax.set_ylabel("rec/s")
    ax.legend(loc="upper left")
    fig.tight_layout()
    return fig


def _log_candidate(experiment_id: str, name: str, model: ForecastingModel, metrics: dict, fig, tags: dict) -> str:
    import mlflow

    with mlflow.start_run(experiment_id=experiment_id, run_name=name) as run:
        mlflow.log_params(
            {
                "candidate": name,
                **{k: json.dumps(v) if isinstance(v, (list, tuple, dict)) else v for k, v in model.params().items()},
            }
        )
        mlflow.log_metrics({k: float(v) for k, v in metrics.items() if isinstance(v, float) and math.isfinite(v)})
        mlflow.set_tags({**tags, "backtest_rule": metrics["rule"], "role": "candidate"})
        mlflow.log_figure(fig, "plots/backtest.png")
    return run.info.run_id


def _champion_on_window(name: str, series: pd.Series, spans: dict, settings: Settings, max_under_rate: float) -> dict | None:
    """The current champion's metrics on the same spans (refit from its params when it saw them)."""
    from mlflow import MlflowClient

    from models import registry
    from models.forecasting.backtest import backtest_select_then_report

    version = registry.champion_version(name)
    if version is None:
        return None
    champion = registry.load_champion(name)
    run_id = MlflowClient().get_model_version(name, version).run_id
    history_end = MlflowClient().get_run(run_id).data.params.get("history_end") if run_id else None
    refit = history_end is None or pd.Timestamp(history_end) >= spans["select_start"]
    if refit:
        params = {k: tuple(v) if isinstance(v, list) else v for k, v in champion.params().items()}
        if "device" in params:
            params["device"] = settings.device
        champion = type(champion)(**params)
    metrics = backtest_select_then_report(champion, series, fit=refit, max_under_rate=max_under_rate, **spans).metrics
    return {"version": version, "refit": refit, **metrics}
