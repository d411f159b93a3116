"""MLflow helpers: log a trained model, register it, promote it to ``@champion``, load the champion.

Use these from training jobs (``log_and_register`` then ``promote_if_better``) and from the
decision loop (``load_champion``). Call :func:`configure` first: it points MLflow at a tracking
URI (SQLite by default) and remembers the artifact root under which every experiment gets its own
folder (``<artifact_root>/<experiment>``), so artifacts never land in the working directory.

Promotion rule: the alias ``champion`` moves to a candidate version when there is no champion
yet, when the champion's run lacks the metric (it cannot defend its title), or when the candidate
beats the champion's value of the same metric by more than ``margin`` (absolute, in the metric's
unit; strictly). Each decision is written on the candidate version as the tag ``promotion``.
"""

from __future__ import annotations

import os

os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")

import json
import math
import shutil
import tempfile
from pathlib import Path
from typing import Any, Mapping

import mlflow
import mlflow.pyfunc
from mlflow import MlflowClient
from mlflow.exceptions import MlflowException

__all__ = [
    "CHAMPION",
    "RegistryError",
    "ModelStoreUnavailable",
    "configure",
    "ensure_experiment",
    "log_and_register",
    "promote_if_better",
    "champion_version",
    "load_champion",
    "version_metric",
]

CHAMPION = "champion"

_state: dict[str, Any] = {"artifact_root": None}


class RegistryError(RuntimeError):
    """A registry operation cannot proceed; the message names the model, version or metric."""


class ModelStoreUnavailable(RegistryError):
    """The model store (MLflow's tracking/registry server) did not answer or failed: not the same as "no champion"."""


#: MLflow error codes that mean "no such model or alias" (a real answer), not a failing store.
_ABSENT_CODES = frozenset({"RESOURCE_DOES_NOT_EXIST", "INVALID_PARAMETER_VALUE", "NOT_FOUND"})


def configure(tracking_uri: str, artifact_root: str | Path, *, request_timeout_s: float | None = None,
              max_retries: int | None = None) -> None:  # fmt: skip
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
        Path(tracking_uri[len("sqlite:///"):]).parent.mkdir(parents=True, exist_ok=True)
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


def log_and_register(
    model_name: str,
    python_model: mlflow.pyfunc.PythonModel,
    *,
    params: Mapping[str, Any],
    metrics: Mapping[str, float],
    artifacts: Mapping[str, str] | None = None,
    files: Mapping[str, Any] | None = None,
    experiment: str,
    pip_requirements: list[str] | None = None,
    tags: Mapping[str, str] | None = None,
    signature: Any = None,
) -> str:
    """Log one training run and register its pyfunc model as a new version of ``model_name``.

    ``artifacts`` are the pyfunc's own files (e.g. ``{"model": path}``), copied into the model;
    ``files`` are extra run artifacts (matplotlib figures or file paths). Non-finite metrics are
    refused (the registry would store them, promotion could not compare them). ``signature``
    (``mlflow.models.infer_signature(..., params=...)``) is needed for predict-time ``params``.
    Returns the version number as a string.
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
        info = mlflow.pyfunc.log_model(
            name="model",
            python_model=python_model,
            artifacts=dict(artifacts or {}),
            # Inferring requirements imports and scans the environment: slow and offline-hostile.
            pip_requirements=list(pip_requirements or []),
            registered_model_name=model_name,
            signature=signature,
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
        raise ModelStoreUnavailable(f"model store {mlflow.get_registry_uri()} did not answer for {model_name!r} "
                                    f"({exc.error_code}: {detail})") from None  # fmt: skip


def promote_if_better(
    model_name: str, version: str, metric: str, margin: float = 0.0, *, lower_is_better: bool = True
) -> bool:
    """Move ``@champion`` to ``version`` when it wins under the module's promotion rule; True if moved."""
    if margin < 0:
        raise ValueError(f"margin must be >= 0, got {margin}")
    candidate = version_metric(model_name, version, metric)
    if candidate is None:
        raise RegistryError(f"model {model_name!r} version {version}: its run has no metric {metric!r}")
    current = champion_version(model_name)
    if current == str(version):
        return False
    incumbent = version_metric(model_name, current, metric) if current is not None else None
    if current is None:
        promote, why = True, "no champion yet"
    elif incumbent is None:
        promote, why = True, f"champion v{current} has no {metric}"
    else:
        gain = (incumbent - candidate) if lower_is_better else (candidate - incumbent)
        promote = gain > margin
        why = f"{metric} {candidate:.6g} vs champion v{current} {incumbent:.6g} (gain {gain:.6g}, margin {margin:g})"
    client = _client()
    if promote:
        client.set_registered_model_alias(model_name, CHAMPION, str(version))
    client.set_model_version_tag(model_name, str(version), "promotion", f"{'promoted' if promote else 'kept champion'}: {why}")
    return promote


def load_champion(model_name: str) -> Any:
    """The champion's Python object: the wrapper's ``.model`` (forecaster, surrogate) or the wrapper.

    Wrappers must read their artifacts in ``load_context`` (the download is removed afterwards).

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
    return wrapper if inner is None else inner
