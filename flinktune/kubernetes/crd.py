"""Validate FlinkDeployment objects and patches against the operator's CRD schema.

Use :func:`load_crd_schema` once (it reads ``flinkdeployments.flink.apache.org-v1*.yml`` from the
CRD folder: ``FLINKTUNE_CRD_DIR`` if set, else the copy shipped in ``flinktune/resources/crds``) and
:func:`validate_object` on every body before it is sent. A violation raises
:class:`CRDValidationError` naming the CRD file, the JSON path and the rule that failed.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from importlib import resources
from pathlib import Path
from typing import Any

import jsonschema
import yaml

__all__ = ["CRDSchema", "CRDValidationError", "default_crd_dir", "load_crd_schema", "validate_object"]


class CRDValidationError(ValueError):
    """A FlinkDeployment body does not match the CRD; the message names file, path and rule."""


class CRDSchema:
    """The ``openAPIV3Schema`` of one version of the FlinkDeployment CRD and where it came from."""

    def __init__(self, schema: Mapping[str, Any], source: str, version: str) -> None:
        self.schema, self.source, self.version = dict(schema), source, version
        self._validator = jsonschema.Draft7Validator(self.schema)

    def errors(self, obj: Mapping[str, Any]) -> list[str]:
        out = []
        for err in sorted(self._validator.iter_errors(obj), key=lambda e: list(e.absolute_path)):
            path = "$" + "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in err.absolute_path)
            out.append(f"{path}: {err.message} (rule {err.validator!r})")
        conf = (obj.get("spec") or {}).get("flinkConfiguration") or {}
        for k, v in conf.items() if isinstance(conf, Mapping) else []:
            if not isinstance(v, str):  # Flink's configuration is Map<String, String>
                out.append(f"$.spec.flinkConfiguration.{k}: {v!r} is not a string (rule 'type')")
        return out


def default_crd_dir() -> Path:
    """``FLINKTUNE_CRD_DIR``, else the operator release's CRD shipped as package data."""
    from flinktune.settings import KubernetesSettings, read_group

    crd_dir = read_group(KubernetesSettings).crd_dir
    return crd_dir if crd_dir is not None else Path(str(resources.files("flinktune") / "resources" / "crds"))


@functools.lru_cache(maxsize=4)
def load_crd_schema(crd_dir: str | Path | None = None, version: str = "v1beta1") -> CRDSchema:
    """The FlinkDeployment schema of ``version`` from the CRD file in ``crd_dir``."""
    folder = Path(crd_dir) if crd_dir is not None else default_crd_dir()
    files = sorted(folder.glob("flinkdeployments.flink.apache.org-v1*.yml"))
    if not files:
        raise FileNotFoundError(f"no FlinkDeployment CRD (flinkdeployments.flink.apache.org-v1*.yml) in {folder}")
    path = files[-1]
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    doc = yaml.load(path.read_text(), Loader=loader)
    try:
        versions = doc["spec"]["versions"]
        entry = next(v for v in versions if v["name"] == version)
        schema = entry["schema"]["openAPIV3Schema"]
    except (KeyError, TypeError, StopIteration):
        raise CRDValidationError(f"{path}: no spec.versions[name={version}].schema.openAPIV3Schema") from None
    return CRDSchema(schema, str(path), version)


def validate_object(obj: Mapping[str, Any], schema: CRDSchema, *, what: str = "FlinkDeployment") -> None:
    """Raise :class:`CRDValidationError` listing every violation of ``obj`` (a full object)."""
    errs = schema.errors(obj)
    if errs:
        raise CRDValidationError(f"{what} does not match {schema.source} ({schema.version}): " + "; ".join(errs[:10]))
