"""Train the configuration surrogate of one job on its profiling observations; register and promote it.

Use :func:`train_surrogate` (``python -m jobs.train_surrogate``, the train DAG, the twin's profiler).

Reads ``<lake>/curated/profiling_observations/job=<job>/**.parquet`` (``PROFILING_COLUMNS`` of
``flinktune.metrics.schema``; the knobs, ``input_rate`` and the four outcomes are used),
maps each row's knobs to [0, 1] with ``ConfigSpace().normalise`` and fits a :class:`GPSurrogate`
(``kind="gp"``, default) or an :class:`RGPESurrogate` (``kind="rgpe"``) on (knobs,
``input_rate``) -> (latency, CPU, memory, recovery). Rows whose knobs are missing are
dropped and counted; a knob value no configuration can have raises, naming the file and row.

Metrics: leave-one-out RMSE and 95 % interval coverage per outcome (model space; ``kind="gp"``,
while ``"rgpe"`` logs its rank weights instead, see :func:`train_surrogate`), the number of observations
and distinct points, fit time, and the held-out RMSE per outcome. Promotion
(:mod:`models.surrogate.holdout`): the newest 20 % of the observations are held out, a fit on the
older ones is scored on them, the champion is re-scored on the same ones, and the version (refitted
on all) replaces the champion when its held-out RMSE of log p95 latency is lower, or when the
champion was trained for another configuration space or cannot score them, provided its metrics
are finite; a version that loses becomes ``@challenger``. The version carries an input example (the first observed
configurations, raw knob values and ``rate``) and the signature inferred from it and its prediction.
The GPs are small and exact, so they train on CPU whatever ``settings.device`` says.
"""

from __future__ import annotations

import tempfile
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow.parquet as pq

from flinktune.config_space import KNOBS, ConfigError, ConfigSpace, Configuration
from flinktune.job_name import job_name
from flinktune.lake import Lake
from flinktune.metrics.schema import PROFILING_DTYPES
from flinktune.runs.model_store import configure_store, pinned_requirements
from flinktune.settings import Settings, load_settings

__all__ = ["KINDS", "PROMOTION_METRIC", "input_example", "observations_to_arrays", "read_observations", "train_surrogate"]

DATASET = "profiling_observations"
#: models.surrogate.holdout.METRIC, spelt out so that importing this module does not import MLflow.
PROMOTION_METRIC = "holdout_rmse.latency_ms"


def read_observations(lake: Lake, job: str) -> pd.DataFrame:
    """All profiling observations of ``job``, with ``_file`` and ``_row`` naming where each row came from.

    Raises FileNotFoundError (no files) or ValueError (no rows, missing columns) naming the path.
    """
    from models.surrogate.types import OUTCOMES

    base = lake.curated_job_dir(DATASET, job)
    files = lake.dataset_files(DATASET, job)
    if not files:
        raise FileNotFoundError(f"dataset {DATASET} has no parquet files for job {job!r} under {base}; run jobs.profile first")
    needed = [*KNOBS, "input_rate", *OUTCOMES]
    frames = []
    for f in files:
        names = pq.read_schema(f).names
        missing = [c for c in needed if c not in names]
        if missing:
            raise ValueError(f"dataset {DATASET}: file {f} lacks column(s) {missing}")
        # ts_ms orders the observations: promotion holds out the newest.
        part = pq.read_table(f, columns=[*needed, *(["ts_ms"] if "ts_ms" in names else [])]).to_pandas()
        part["_file"] = str(f)
        part["_row"] = np.arange(len(part))
        frames.append(part)
    df = pd.concat(frames, ignore_index=True)
    if df.empty:
        raise ValueError(f"dataset {DATASET} for job {job!r} under {base} has no rows")
    return df


def observations_to_arrays(df: pd.DataFrame, space: ConfigSpace) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
    """(X normalised knobs, rates, Y outcomes, rows dropped for missing knobs) from observation rows."""
    from models.surrogate.types import OUTCOMES

    complete = df[list(KNOBS)].notna().all(axis=1).to_numpy()
    kept = df.loc[complete]
    rows = []
    for pos, rec in enumerate(kept[list(KNOBS)].to_dict("records")):
        where = (
            f"dataset {DATASET}, file {kept['_file'].iloc[pos]}, row {kept['_row'].iloc[pos]}"
            if "_file" in kept
            else f"dataset {DATASET}, row {pos}"
        )
        x = space.normalise(Configuration.from_dict(rec, where=where))
        for k, v, (lo, hi) in zip(KNOBS, x, space.bounds()):
            if not -1e-9 <= v <= 1 + 1e-9:
                raise ConfigError(f"{where}: {k}={rec[k]!r} is outside the configuration space's range [{lo:g}, {hi:g}]")
        rows.append(x)
    X = np.asarray(rows, dtype="float64").reshape(-1, len(KNOBS))
    return X, kept["input_rate"].to_numpy("float64"), kept[list(OUTCOMES)].to_numpy("float64"), int((~complete).sum())


def input_example(df: pd.DataFrame, rows: int = 3) -> pd.DataFrame:
    """The first ``rows`` complete observations as a pyfunc request: raw knob columns plus ``rate`` (rec/s).

    Knobs keep the profiling table's types (integers but ``cpu``), so the signature inferred from
    it accepts what ``Configuration.to_dict()`` gives."""
    complete = df.loc[df[list(KNOBS)].notna().all(axis=1)].head(rows)
    example = complete[list(KNOBS)].astype({k: PROFILING_DTYPES.get(k, "float64") for k in KNOBS})
    example = example.reset_index(drop=True)
    example["rate"] = complete["input_rate"].astype("float64").to_numpy()
    return example


KINDS = ("gp", "rgpe")


def train_surrogate(*, job: str, settings: Settings | None = None, seed: int = 0, kind: str = "gp") -> dict:
    """Fit, evaluate, register ``flinktune-surrogate-<job>``, promote when it predicts the newest observations better.

    ``kind="gp"``: one pooled GP per outcome (leave-one-out metrics). ``kind="rgpe"``: rank-weighted
    per-rate-bucket GPs (:class:`RGPESurrogate`); its metrics are the bucket count and, per
    observed bucket and outcome, the target model's weight (``rgpe_target_weight.<outcome>.b<k>``;
    1.0 when nothing transfers, absent where the pooled fallback applies).
    """
    from mlflow.models import infer_signature

    from models import registry
    from models.surrogate.gp import GPSurrogate
    from models.surrogate.holdout import hold_out, promote_on_holdout
    from models.surrogate.pyfunc import SurrogatePyfunc
    from models.surrogate.rgpe_surrogate import RGPESurrogate
    from models.surrogate.types import SurrogateDataWarning, SurrogateInputError

    if kind not in KINDS:
        raise ValueError(f"unknown surrogate kind {kind!r}; expected one of {KINDS}")
    job = job_name(job)  # before it reaches any path, model name or API call
    settings = settings or load_settings()
    space = ConfigSpace()
    lake = Lake(settings.lake_dir)  # type: ignore[arg-type]  # filled by the settings' validator
    df = read_observations(lake, job)
    X, rates, Y, no_knobs = observations_to_arrays(df, space)
    t0 = time.perf_counter()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", SurrogateDataWarning)
        try:
            cls = GPSurrogate if kind == "gp" else RGPESurrogate
            model = cls(device="cpu", seed=seed).fit(X, rates, Y)
        except SurrogateInputError as exc:
            raise SurrogateInputError(f"dataset {DATASET} job={job}: {exc}") from None
    fit_s = time.perf_counter() - t0
    held = hold_out(
        df,
        X,
        rates,
        Y,
        job=job,
        knobs=list(KNOBS),
        bounds=space.bounds(),
        fit=lambda x, r, y: cls(device="cpu", seed=seed).fit(x, r, y),
    )
    metrics: dict[str, float] = {
        "observations": float(len(df)),
        "rows_without_knobs": float(no_knobs),
        "fit_seconds": fit_s,
        **{k: v for k, v in model.fit_info.items()},
        **held.metrics(),
    }
    if isinstance(model, GPSurrogate):  # kind == "gp"
        for outcome, (y, mean, std) in model.loo().items():
            metrics[f"loo_rmse.{outcome}"] = float(np.sqrt(np.mean((y - mean) ** 2)))
            metrics[f"loo_coverage95.{outcome}"] = float(np.mean(np.abs(y - mean) <= 1.96 * std))
    else:
        for b in sorted({model.buckets.index(r) for r in rates[np.isfinite(rates) & (rates >= 0)]}):
            lo, hi = model.buckets.bounds(b)
            for outcome, w in model.weights((lo + hi) / 2).items():
                if w["kind"] == "rgpe":
                    metrics[f"rgpe_target_weight.{outcome}.b{b}"] = w["weights"]["target"]
    name = f"flinktune-surrogate-{job}"
    configure_store(settings)
    wrapper = SurrogatePyfunc(list(KNOBS), space.bounds())
    example = input_example(df)
    # The signature comes from the example and the fitted model's answer to it; the wrapper is
    # logged without the model (it loads the saved file in load_context).
    wrapper.model = model
    signature = infer_signature(example, wrapper.predict(None, example))
    wrapper.model = None
    with tempfile.TemporaryDirectory(prefix="flinktune-surrogate-") as tmp:
        path = model.save(Path(tmp) / "surrogate.pt")
        version = registry.log_and_register(
            name,
            wrapper,
            params={
                "job": job,
                "model": model.name,
                "kind": kind,
                "outcomes": list(model.outcomes),
                "seed": seed,
                "rate_scale": model.rate_scale,
                "warnings": " | ".join(str(w.message) for w in caught)[:500],
            },
            metrics={k: v for k, v in metrics.items() if np.isfinite(v)},
            artifacts={"model": str(path)},
            experiment=name,
            pip_requirements=pinned_requirements("mlflow", "botorch", "torch"),
            signature=signature,
            input_example=example,
            logged_model_name=f"surrogate-{job}-{kind}",
            training_data=registry.lake_dataset(
                df.drop(columns=["_file", "_row"]),
                source=lake.curated_job_dir(DATASET, job),
                name=f"{DATASET}-{job}",
            ),
        )
    bad = sorted(k for k, v in metrics.items() if not np.isfinite(v))
    promotion = promote_on_holdout(
        name,
        version,
        held,
        knobs=list(KNOBS),
        bounds=space.bounds(),
        requirement=(not bad, f"finite metrics{' (non-finite: ' + ', '.join(bad) + ')' if bad else ''}"),
        data=f"Trained on {len(df)} profiling observations of job {job} ({DATASET}-{job}, {len(np.unique(X, axis=0))} distinct "
        "configurations).",
    )
    return {
        "model_name": name,
        "version": version,
        "promoted": promotion.promoted,
        "promotion": promotion.reason,
        "champion": registry.champion_version(name),
        "metrics": metrics,
    }
