"""The MLflow registry: log a trained model, register it, promote it to ``@champion``, load the champion.

Use these from training jobs (``log_and_register`` then ``promote``) and from the
decision loop (``load_champion``). Call :func:`configure` first: it points MLflow at a tracking
URI (SQLite by default) and remembers the artifact root under which every experiment gets its own
folder (``<artifact_root>/<experiment>``), so artifacts never land in the working directory.

Promotion rule (:func:`promote`, the forecaster's): the alias ``champion`` moves
to a candidate version when there is no champion yet, when the champion lacks the metric (it
cannot defend its title), or when the candidate beats the champion's value of the same metric by
more than ``margin`` (absolute, or relative to the champion's value; strictly), and any extra
requirement holds. The surrogate decides on its held-out scores (:mod:`models.surrogate.holdout`)
and records through :func:`record_promotion`, as :func:`promote` does. Each decision is written on
the candidate version as the tag ``promotion`` and in words as its description. A
version that is not promoted carries the alias ``challenger`` (the latest loser, so a user can load
and compare it by name); a promotion drops a ``challenger`` alias older than the new champion.

Every registered version is self-contained: it ships this ``models`` package as pyfunc code (so
``mlflow.pyfunc.load_model("models:/<name>@champion")`` works in a process that cannot import this
repository), its pinned pip requirements, and, when the job gives one, an input example and the
signature inferred from it. Its LoggedModel is named after the job and model kind
(``logged_model_name``), and its run has the training data as a ``training`` dataset input
(:func:`lake_dataset`: name, digest, schema and the lake folder it was read from).
"""

from __future__ import annotations

import os

os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")

import json
import math
import shutil
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import mlflow
import mlflow.pyfunc
from mlflow import MlflowClient
from mlflow.exceptions import MlflowException
from mlflow.pyfunc import PythonModel

from flinktune.redaction import redact

__all__ = [
    "CHALLENGER",
    "CHAMPION",
    "MODELS_PACKAGE",
    "ModelStoreUnavailable",
    "Promotion",
    "RegistryError",
    "champion_version",
    "configure",
    "describe_promotion",
    "ensure_experiment",
    "lake_dataset",
    "load_champion",
    "log_and_register",
    "promote",
    "record_promotion",
    "version_metric",
]

CHAMPION = "champion"
#: Alias of the latest version that was registered and not promoted.
CHALLENGER = "challenger"
#: The package holding every pyfunc wrapper, shipped inside each model (pyfunc ``code_paths``).
MODELS_PACKAGE = Path(__file__).resolve().parent

_state: dict[str, Any] = {"artifact_root": None}


class RegistryError(RuntimeError):
    """A registry operation cannot proceed; the message names the model, version or metric."""


class ModelStoreUnavailable(RegistryError):
    """The model store (MLflow's tracking/registry server) did not answer or failed: not the same as "no champion"."""


#: MLflow error codes that mean "no such model or alias" (a real answer), not a failing store.
_ABSENT_CODES = frozenset({"RESOURCE_DOES_NOT_EXIST", "INVALID_PARAMETER_VALUE", "NOT_FOUND"})


def configure(
    tracking_uri: str, artifact_root: str | Path, *, request_timeout_s: float | None = None, max_retries: int | None = None
) -> None:
    """Point MLflow (tracking and registry) at ``tracking_uri``; experiments go under ``artifact_root``.

    ``request_timeout_s`` and ``max_retries`` bound every HTTP request MLflow makes (its own
    ``MLFLOW_HTTP_REQUEST_TIMEOUT`` / ``MLFLOW_HTTP_REQUEST_MAX_RETRIES``; MLflow's defaults, 120 s and
    7 retries with exponential backoff, let one unreachable server cost minutes). Left None, they
    keep whatever the environment says."""
    os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
    if request_timeout_s is not None:
        if not request_timeout_s > 0:
            raise ValueError(f"MLflow request timeout must be > 0 s, got {request_timeout_s}")
        os.environ["MLFLOW_HTTP_REQUEST_TIMEOUT"] = str(max(1, int(round(request_timeout_s))))
    if max_retries is not None:
        if max_retries < 0:
            raise ValueError(f"MLflow max retries must be >= 0, got {max_retries}")
        os.environ["MLFLOW_HTTP_REQUEST_MAX_RETRIES"] = str(int(max_retries))
    if tracking_uri.startswith("sqlite:///"):
        Path(tracking_uri[len("sqlite:///") :]).parent.mkdir(parents=True, exist_ok=True)
        from models.store_home import follow_home

        follow_home(tracking_uri)  # a copied state folder logs into itself, not into the folder it was copied from
    root = Path(artifact_root).resolve()
    root.mkdir(parents=True, exist_ok=True)
    mlflow.set_tracking_uri(tracking_uri)
    mlflow.set_registry_uri(tracking_uri)
    _state["artifact_root"] = root


def _client() -> MlflowClient:
    return MlflowClient()


def ensure_experiment(name: str) -> str:
    """The id of experiment ``name``, created with artifact location ``<artifact_root>/<name>``."""
    root = _state["artifact_root"]
    if root is None:
        raise RegistryError("models.registry.configure(tracking_uri, artifact_root) must be called first")
    client = _client()
    exp = client.get_experiment_by_name(name)
    if exp is not None:
        return exp.experiment_id
    return client.create_experiment(name, artifact_location=(root / name).as_uri())


def _log_file(key: str, item: Any) -> None:
    """Log a plot (matplotlib figure) or a file path as a run artifact under ``plots/``/``files/``."""
    if hasattr(item, "savefig"):
        mlflow.log_figure(item, f"plots/{key}.png")
        return
    path = Path(item)
    if not path.exists():
        raise RegistryError(f"artifact {key!r}: file {path} does not exist")
    mlflow.log_artifact(str(path), artifact_path="files")


def lake_dataset(df: Any, *, source: str | Path, name: str) -> Any:
    """``df`` (pandas) as an ``mlflow.data`` dataset for :func:`log_and_register`'s ``training_data``.

    ``source`` is the lake folder the frame was read from (a curated dataset's ``job=<job>``
    folder), so a user can find the files; ``name`` says which dataset of which job
    (``features_1m-demo``). MLflow stores its digest, schema and row count, not the rows.
    """
    import warnings

    # mlflow.data.from_pandas is this function, attached at import time where type checkers cannot see it
    from mlflow.data.pandas_dataset import from_pandas

    with warnings.catch_warnings():
        # A local path matches the "" and the "file" scheme, both LocalArtifactDatasetSource: nothing to choose.
        warnings.filterwarnings("ignore", message="The specified dataset source can be interpreted in multiple ways")
        return from_pandas(df, source=str(Path(source).resolve()), name=name)


def log_and_register(
    model_name: str,
    python_model: PythonModel,
    *,
    params: Mapping[str, Any],
    metrics: Mapping[str, float],
    artifacts: Mapping[str, str] | None = None,
    files: Mapping[str, Any] | None = None,
    experiment: str,
    pip_requirements: list[str] | None = None,
    tags: Mapping[str, str] | None = None,
    signature: Any = None,
    input_example: Any = None,
    logged_model_name: str = "model",
    training_data: Any = None,
) -> str:
    """Log one training run and register its pyfunc model as a new version of ``model_name``.

    ``artifacts`` are the pyfunc's own files (e.g. ``{"model": path}``), copied into the model;
    ``files`` are extra run artifacts (matplotlib figures or file paths). Non-finite metrics are
    refused (the registry would store them, promotion could not compare them). ``signature``
    (``mlflow.models.infer_signature(..., params=...)``) is needed for predict-time ``params``;
    ``input_example`` is stored with the model (``Model.load_input_example``), a request a user can
    send as is. The ``models`` package goes with the model as code, so the wrapper unpickles in a
    process that has only the pinned requirements installed. ``logged_model_name`` names the MLflow 3
    LoggedModel the version points at (say which job and model kind, e.g. ``forecaster-demo-peak-gbm``;
    no ``/ : . %`` or quotes); ``training_data`` (an ``mlflow.data`` dataset whose source is the lake
    path it was read from) is logged as the run's ``training`` input. Returns the version number as a string.
    """
    bad = [k for k, v in metrics.items() if not math.isfinite(float(v))]
    if bad:
        raise RegistryError(f"model {model_name!r}: non-finite metric(s) {bad}")
    exp_id = ensure_experiment(experiment)
    with mlflow.start_run(experiment_id=exp_id) as run:
        mlflow.log_params({k: json.dumps(v) if isinstance(v, (dict, list, tuple)) else v for k, v in params.items()})
        mlflow.log_metrics({k: float(v) for k, v in metrics.items()})
        if tags:
            mlflow.set_tags(dict(tags))
        for key, item in (files or {}).items():
            _log_file(key, item)
        if training_data is not None:
            mlflow.log_input(training_data, context="training")
        info = mlflow.pyfunc.log_model(
            name=logged_model_name,
            python_model=python_model,
            artifacts=dict(artifacts or {}),
            # Inferring requirements imports and scans the environment: slow and offline-hostile.
            pip_requirements=list(pip_requirements or []),
            registered_model_name=model_name,
            signature=signature,
            input_example=input_example,
            # The wrappers are pickled by reference (models.forecasting.pyfunc.ForecasterPyfunc, ...):
            # shipping their package lets a process outside this repository unpickle them.
            code_paths=[str(MODELS_PACKAGE)],
        )
    version = info.registered_model_version
    if version is None:
        raise RegistryError(f"model {model_name!r}: run {run.info.run_id} logged but no version was registered")
    return str(version)


def version_metric(model_name: str, version: str, metric: str) -> float | None:
    """The value of ``metric`` in the run that produced ``model_name`` version ``version`` (None if absent)."""
    client = _client()
    try:
        mv = client.get_model_version(model_name, str(version))
    except MlflowException as exc:
        raise RegistryError(f"model {model_name!r} has no version {version!r}: {exc.message}") from None
    if not mv.run_id:
        return None
    return client.get_run(mv.run_id).data.metrics.get(metric)


def champion_version(model_name: str) -> str | None:
    """The version carrying ``@champion``, or None when the model or the alias does not exist.

    Raises :class:`ModelStoreUnavailable` when the store did not answer (unreachable, timed out, 5xx)."""
    try:
        return str(_client().get_model_version_by_alias(model_name, CHAMPION).version)
    except MlflowException as exc:
        if exc.error_code in _ABSENT_CODES:
            return None
        detail = " ".join(str(exc).split())[:200]
        raise ModelStoreUnavailable(
            redact(f"model store {mlflow.get_registry_uri()} did not answer for {model_name!r} ({exc.error_code}: {detail})")
        ) from None
    except Exception as exc:  # the store itself is broken (a corrupt database file): never "no champion"
        detail = str(exc).splitlines()[0][:200] if str(exc) else type(exc).__name__
        raise ModelStoreUnavailable(
            redact(f"model store {mlflow.get_registry_uri()} cannot be read for {model_name!r} ({type(exc).__name__}: {detail})")
        ) from None


@dataclass(frozen=True)
class Promotion:
    """The outcome of :func:`promote`: whether ``@champion`` moved, and why (the version's ``promotion`` tag)."""

    promoted: bool
    reason: str


def promote(
    model_name: str,
    version: str,
    metric: str,
    *,
    challenger: float | None = None,
    incumbent: float | None = None,
    margin: float = 0.0,
    relative: bool = False,
    lower_is_better: bool = True,
    requirement: tuple[bool, str] | None = None,
    context: str = "",
    data: str = "",
) -> Promotion:
    """Champion/challenger on one metric: move ``@champion`` to ``version`` when it wins.

    The forecaster's promotion (the surrogate's decides on held-out scores and ends in
    :func:`record_promotion`, as this does). ``challenger`` is the
    version's value of ``metric`` (None: read from its run); ``incumbent`` the champion's value on
    the same data (None: read from the champion's run; a forecaster passes its re-backtest on the
    challenger's window). The challenger must beat it by more than ``margin`` (absolute, or a
    fraction of the champion's value when ``relative``), strictly. ``requirement`` is an extra
    condition as ``(met, what was checked)``: unmet, the version is not promoted even without a
    champion. ``context`` (e.g. the scoring window) starts the comparison in the reason. The reason goes on the
    version as the tag ``promotion`` (``promoted: ...`` or ``kept champion: ...``), with
    ``promotion_metric``; a version that already is the champion changes nothing. A version that
    loses becomes ``@challenger``; a winner removes a ``@challenger`` older than itself. The version's
    description says the same in words (:func:`describe_promotion`): what it beat or lost to, on what
    ``data`` it was trained and judged.
    """
    if margin < 0:
        raise ValueError(f"margin must be >= 0, got {margin}")
    if challenger is None:
        challenger = version_metric(model_name, version, metric)
        if challenger is None:
            raise RegistryError(f"model {model_name!r} version {version}: its run has no metric {metric!r}")
    current = champion_version(model_name)
    if current == str(version):
        return Promotion(False, f"v{version} already is the champion")
    if incumbent is None and current is not None:
        incumbent = version_metric(model_name, current, metric)
    limit: float | None = None
    if current is None:
        wins, why = True, "no champion yet"
    elif incumbent is None:
        wins, why = True, f"champion v{current} has no {metric}"
    else:
        step = abs(incumbent) * margin if relative else margin
        limit = incumbent - step if lower_is_better else incumbent + step
        wins = challenger < limit if lower_is_better else challenger > limit
        why = (
            f"{context + ': ' if context else ''}{metric} {challenger:.6g} vs champion v{current} {incumbent:.6g} "
            f"(needs {'<' if lower_is_better else '>'} {limit:.6g}, margin {margin:g}{' relative' if relative else ''})"
        )
    if requirement is not None:
        met, what = requirement
        wins = wins and met
        why = f"{why}; {what}{'' if met else ' (not met)'}"
    words = describe_promotion(
        wins,
        metric,
        challenger,
        current,
        incumbent,
        limit,
        lower_is_better=lower_is_better,
        requirement=requirement,
        context=context,
        data=data,
    )
    return record_promotion(model_name, version, wins, why, metric=metric, description=words)


def record_promotion(model_name: str, version: str, wins: bool, why: str, *, metric: str, description: str) -> Promotion:
    """Carry out a decision made by the caller: move ``@champion`` to ``version`` (``wins``) or make it ``@challenger``.

    The tag ``promotion`` gets ``promoted: <why>`` or ``kept champion: <why>``, ``promotion_metric``
    the metric it was decided on, and the version's description ``description`` (words a person
    reads in the MLflow UI). :func:`promote` ends here; a model kind whose comparison needs more
    than two numbers (the surrogate's held-out scores, :mod:`models.surrogate.holdout`) decides
    itself and calls this.
    """
    reason = f"{'promoted' if wins else 'kept champion'}: {why}"
    client = _client()
    if wins:
        client.set_registered_model_alias(model_name, CHAMPION, str(version))
        _drop_stale_challenger(client, model_name, int(version))
    else:
        client.set_registered_model_alias(model_name, CHALLENGER, str(version))
    client.set_model_version_tag(model_name, str(version), "promotion", reason)
    client.set_model_version_tag(model_name, str(version), "promotion_metric", metric)
    client.update_model_version(model_name, str(version), description=description)
    return Promotion(wins, reason)


def describe_promotion(
    wins: bool,
    metric: str,
    challenger: float,
    current: str | None,
    incumbent: float | None,
    limit: float | None,
    *,
    lower_is_better: bool = True,
    requirement: tuple[bool, str] | None = None,
    context: str = "",
    data: str = "",
) -> str:
    """A model version's description: why it is (or is not) the champion, in words a person reads in the MLflow UI."""
    better = "lower" if lower_is_better else "higher"
    where = f" ({context})" if context else ""
    if current is None:
        head = "Champion: it is the first version that could be promoted (there was no champion yet)."
    elif incumbent is None:
        head = f"Champion: the champion before it, version {current}, had no {metric} to defend its place."
    elif wins:
        head = (
            f"Champion: it beat version {current}{where}: {metric} {challenger:.4g} against {incumbent:.4g} "
            f"({better} is better; it had to reach {limit:.4g})."
        )
    else:
        head = (
            f"Not promoted (challenger): version {current} stays champion{where}: {metric} {challenger:.4g} against "
            f"{incumbent:.4g} ({better} is better; it had to reach {limit:.4g})."
        )
    if requirement is not None:
        met, what = requirement
        head += f" Also required: {what}, {'met' if met else 'not met, so it was not promoted'}."
    return f"{head} {data}".strip()


def _drop_stale_challenger(client: MlflowClient, model_name: str, champion: int) -> None:
    """Remove ``@challenger`` when it names a version older than the new champion (it lost to an older one)."""
    try:
        current = int(client.get_model_version_by_alias(model_name, CHALLENGER).version)
    except MlflowException as exc:
        if exc.error_code in _ABSENT_CODES:
            return
        raise
    if current < champion:
        client.delete_registered_model_alias(model_name, CHALLENGER)


def load_champion(model_name: str, *, unwrap: bool = True) -> Any:
    """The champion's Python object: the wrapper's ``.model`` (forecaster, surrogate) or the wrapper.

    ``unwrap=False`` returns the pyfunc wrapper itself (what it was logged with: for a surrogate,
    the knob names and bounds it scales raw values with). Wrappers must read their artifacts in
    ``load_context`` (the download is removed afterwards).

    Raises :class:`RegistryError` naming the model when it has no champion.
    """
    if champion_version(model_name) is None:
        raise RegistryError(f"model {model_name!r} has no @{CHAMPION} version (train and promote one first)")
    # Wrappers load their files eagerly in load_context, so the download can go right after.
    dst = tempfile.mkdtemp(prefix="flinktune-champion-")
    try:
        wrapper = mlflow.pyfunc.load_model(f"models:/{model_name}@{CHAMPION}", dst_path=dst).unwrap_python_model()
    finally:
        shutil.rmtree(dst, ignore_errors=True)
    inner = getattr(wrapper, "model", None)
    return wrapper if inner is None or not unwrap else inner
