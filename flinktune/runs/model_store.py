"""The MLflow model store as the training runs use it: configured from the settings, and the pip
requirements a registered model carries, read from what is installed. Use :func:`configure_store`
before a training or decide run touches the registry, and :func:`pinned_requirements` for a model's
``pip_requirements``: the versions are pinned once, in ``pyproject.toml``, and the environment
installed from it is what the model was trained with.
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

from flinktune.settings import Settings

__all__ = ["configure_store", "pinned_requirements"]


def configure_store(settings: Settings) -> None:
    """Point the model registry at the settings' MLflow store, with their request timeout and retries."""
    from models.registry import configure

    # The URI and the artifact root are filled by the settings' validator.
    configure(
        settings.mlflow_tracking_uri,  # type: ignore[arg-type]
        settings.mlflow_artifact_root,  # type: ignore[arg-type]
        request_timeout_s=settings.timeouts.mlflow_request_s,
        max_retries=settings.timeouts.mlflow_retries,
    )


def pinned_requirements(*distributions: str) -> list[str]:
    """``name==version`` for each installed distribution (what a process that loads the model needs)."""
    pins = []
    for name in distributions:
        try:
            # The public version only: a local label (torch's "+cpu") names a build, not a release on the index.
            pins.append(f"{name}=={version(name).split('+')[0]}")
        except PackageNotFoundError:
            raise ValueError(f"pip requirement {name!r}: the distribution is not installed in this environment") from None
    return pins
