"""The fleet: the jobs flinktune manages and each one's settings.

Use :func:`load_fleet_file` on the twin (a ``fleet.yaml``) and :func:`discover_flinkdeployments`
on Kubernetes (FlinkDeployments labelled ``flinktune.io/managed: "true"``, settings in
``flinktune.io/<setting>`` annotations). Both return a :class:`Fleet`: one :class:`FleetEntry` per
job, either managed (its :class:`JobSettings`) or held (a one-line reason naming the bad setting
and where it came from). A bad entry holds that job only; the others go on. Only a file that
cannot be read as a fleet at all raises :class:`FleetError`.

A fleet file::

    defaults:            # optional, applied to every job (any JobSettings field but name)
      latency_target_ms: 1000
    jobs:
      - name: ads
        latency_target_ms: 800
        policy: flinktune
      - name: clicks
        kind: ysb        # jobs of one kind may share surrogate base models (RGPE transfer)
        mode: act        # apply its decisions; a job without a mode only advises
"""

from __future__ import annotations

import difflib
import logging
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from flinktune.job_name import JobName
from flinktune.pricing import PriceList, load_prices

__all__ = [
    "ANNOTATION_PREFIX",
    "MANAGED_LABEL",
    "Fleet",
    "FleetEntry",
    "FleetError",
    "JobSettings",
    "discover_flinkdeployments",
    "load_fleet_file",
]

log = logging.getLogger(__name__)

MANAGED_LABEL = "flinktune.io/managed"
ANNOTATION_PREFIX = "flinktune.io/"
#: Policies that cannot run a real job: the oracle reads the twin's future.
_NOT_FOR_A_FLEET = {"oracle"}


class FleetError(ValueError):
    """The fleet file cannot be read as a fleet at all (the message names the file and the fix)."""


class JobSettings(BaseModel):
    """One managed job's goals, bounds and policy; defaults are the product's defaults.

    Field names are the fleet file's keys; on Kubernetes each is the annotation
    ``flinktune.io/<name with dashes>`` (``flinktune.io/latency-target-ms: "800"``).
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: JobName
    namespace: str = Field("default", description="Kubernetes namespace of the FlinkDeployment.")
    kind: str | None = Field(None, description="Workload kind; jobs of one kind share surrogate base models.")
    policy: str = Field("flinktune", description="Policy that decides for this job.")
    latency_target_ms: float = Field(1000.0, gt=0, le=3_600_000, description="p95 end-to-end latency target, ms.")
    recovery_limit_s: float = Field(180.0, gt=0, le=86_400, description="Recovery-time limit after a failure, s.")
    mode: Literal["advise", "act"] | None = Field(
        None,
        description="advise (every job's start: decide and record, change nothing) or act (apply the decisions); "
        "`flinktune fleet act|advise JOB` switches it too, and an advise from either wins.",
    )
    min_parallelism: int | None = Field(None, ge=1, le=10_000, description="Lowest parallelism flinktune may set.")
    max_parallelism: int | None = Field(None, ge=1, le=10_000, description="Highest parallelism flinktune may set.")
    price_cpu_core_hour: float | None = Field(
        None, gt=0, description="Price of one reserved core-hour for this job (else the price list)."
    )
    price_memory_gib_hour: float | None = Field(
        None, gt=0, description="Price of one reserved GiB-hour for this job (else the price list)."
    )

    @field_validator("policy")
    @classmethod
    def _known_policy(cls, value: str) -> str:
        from flinktune.policies import POLICY_NAMES

        usable = [p for p in POLICY_NAMES if p not in _NOT_FOR_A_FLEET]
        if value not in usable:
            raise ValueError(f"unknown policy {value!r}; use one of {', '.join(usable)}")
        return value

    def prices(self) -> PriceList:
        """The price list (``FLINKTUNE_PRICE_*`` or its defaults) with this job's own prices where it sets them."""
        own = {"cpu_core_hour": self.price_cpu_core_hour, "memory_gib_hour": self.price_memory_gib_hour}
        return load_prices(**{k: v for k, v in own.items() if v is not None})

    @model_validator(mode="after")
    def _bounds_in_order(self) -> JobSettings:
        lo, hi = self.min_parallelism, self.max_parallelism
        if lo is not None and hi is not None and lo > hi:
            raise ValueError(f"min_parallelism {lo} is above max_parallelism {hi}")
        return self


@dataclass(frozen=True)
class FleetEntry:
    """One job of the fleet: ``settings`` when it is managed, else ``held`` says why it is not."""

    name: str
    source: str
    settings: JobSettings | None = None
    held: str | None = None

    @property
    def managed(self) -> bool:
        return self.settings is not None


@dataclass(frozen=True)
class Fleet:
    """The entries in a stable order (by name, then source)."""

    entries: tuple[FleetEntry, ...]

    def managed(self) -> list[JobSettings]:
        return [e.settings for e in self.entries if e.settings is not None]

    def held(self) -> list[FleetEntry]:
        return [e for e in self.entries if e.settings is None]

    def get(self, name: str) -> FleetEntry:
        for entry in self.entries:
            if entry.name == name:
                return entry
        raise KeyError(f"job {name!r} is not in the fleet; known: {', '.join(e.name for e in self.entries) or 'none'}")


def _one_line(exc: ValidationError, show: Callable[[str], str] = str) -> str:
    """A pydantic error as ``key: message; key: message`` without its URLs; ``show`` spells a field as its source does."""
    known = [f for f in JobSettings.model_fields if f != "name"]
    parts = []
    for err in exc.errors():
        field = ".".join(str(p) for p in err["loc"]) or "settings"
        if err["type"] == "extra_forbidden":
            close = difflib.get_close_matches(field, known, n=1)
            hint = f"did you mean {show(close[0])!r}?" if close else f"known: {', '.join(show(k) for k in known)}"
            parts.append(f"{show(field)}: unknown setting ({hint})")
        else:
            parts.append(f"{show(field)}: {err['msg'].removeprefix('Value error, ')} (got {err['input']!r})")
    return "; ".join(parts)


def _entry(raw: Mapping[str, Any], name: object, source: str, show: Callable[[str], str] = str) -> FleetEntry:
    try:
        return FleetEntry(str(name), source, settings=JobSettings(**raw))
    except ValidationError as exc:
        reason = f"{source}: {_one_line(exc, show)}"
        log.warning("fleet: job %r held: %s", name, reason)
        return FleetEntry(str(name), source, held=reason)


def _hold_duplicates(entries: Iterable[FleetEntry], why: str) -> tuple[FleetEntry, ...]:
    """Hold every job whose name appears more than once: lake, models and reports are keyed by name."""
    entries = list(entries)
    by_name: dict[str, list[FleetEntry]] = {}
    for e in entries:
        by_name.setdefault(e.name, []).append(e)
    out = []
    for e in entries:
        twins = by_name[e.name]
        if len(twins) > 1:
            places = ", ".join(t.source for t in twins)
            reason = f"job name {e.name!r} appears {len(twins)} times ({places}); {why}"
            log.warning("fleet: job %r held: %s", e.name, reason)
            e = FleetEntry(e.name, e.source, held=reason)
        out.append(e)
    return tuple(sorted(out, key=lambda e: (e.name, e.source)))


def load_fleet_file(path: Path) -> Fleet:
    """The fleet of a ``fleet.yaml`` (format in the module doc).

    Raises :class:`FleetError` when the file is missing, not YAML, or not shaped as a fleet, or when
    ``defaults`` is invalid (it would hold every job). A bad job entry is held, not raised.
    """
    path = Path(path)
    try:
        doc = yaml.safe_load(path.read_text())
    except FileNotFoundError:
        raise FleetError(f"{path}: fleet file not found") from None
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        raise FleetError(f"{path}: not a readable YAML file ({str(exc).splitlines()[0]})") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("jobs"), list):
        raise FleetError(f"{path}: expected a mapping with a 'jobs' list (and optional 'defaults')")
    extra = sorted(set(doc) - {"jobs", "defaults"})
    if extra:
        raise FleetError(f"{path}: unknown top-level keys {extra}; a fleet file has 'jobs' and 'defaults'")
    defaults = doc.get("defaults") or {}
    if not isinstance(defaults, dict) or "name" in defaults:
        raise FleetError(f"{path}: 'defaults' must be a mapping of settings without 'name'")
    try:
        JobSettings(name="defaults-check", **defaults)
    except ValidationError as exc:
        raise FleetError(f"{path}: defaults: {_one_line(exc)}") from None
    entries = []
    for i, job in enumerate(doc["jobs"]):
        source = f"{path.name}: jobs[{i}]"
        if not isinstance(job, dict):
            entries.append(FleetEntry(f"<jobs[{i}]>", source, held=f"{source}: expected a mapping with a 'name', got {job!r}"))
            continue
        entries.append(_entry({**defaults, **job}, job.get("name", f"<jobs[{i}]>"), source))
    return Fleet(_hold_duplicates(entries, "give each job one entry"))


def _annotation(field: str) -> str:
    return ANNOTATION_PREFIX + field.replace("_", "-")


def settings_from_annotations(annotations: Mapping[str, str]) -> dict[str, str]:
    """The ``flinktune.io/<setting>`` annotations as fleet-file keys (dashes to underscores)."""
    return {
        key[len(ANNOTATION_PREFIX) :].replace("-", "_"): value
        for key, value in annotations.items()
        if key.startswith(ANNOTATION_PREFIX) and key != MANAGED_LABEL
    }


def discover_flinkdeployments(api: Any, namespace: str | None = None) -> Fleet:
    """The managed FlinkDeployments of ``namespace`` (every namespace when None) as a fleet.

    ``api`` is a ``kubernetes.client.CustomObjectsApi`` (or anything with its two list calls).
    Only objects labelled ``flinktune.io/managed=true`` are listed; a bad annotation holds that job
    with a warning naming the annotation. The same name in two namespaces holds both: flinktune
    keys its lake, models and reports by job name.
    """
    from flinktune.kubernetes.realizer import GROUP, PLURAL, VERSION

    selector = f"{MANAGED_LABEL}=true"
    if namespace is None:
        listed = api.list_cluster_custom_object(GROUP, VERSION, PLURAL, label_selector=selector)
    else:
        listed = api.list_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, label_selector=selector)
    entries = []
    for obj in listed.get("items", []):
        meta = obj.get("metadata") or {}
        name, ns = meta.get("name", "?"), meta.get("namespace", namespace or "default")
        fields = settings_from_annotations(meta.get("annotations") or {})
        source = f"FlinkDeployment {ns}/{name}"
        if "name" in fields or "namespace" in fields:
            entries.append(FleetEntry(name, source, held=f"{source}: annotations may not set name or namespace"))
            continue
        entries.append(_entry({**fields, "name": name, "namespace": ns}, name, source, _annotation))
    return Fleet(_hold_duplicates(entries, "rename one or remove its flinktune.io/managed label"))
