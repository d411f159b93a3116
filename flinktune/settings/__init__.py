"""Typed settings for every stage, read from the environment (prefix ``FLINKTUNE_``).

Use :func:`load_settings` in job entry points; pass the resulting :class:`Settings` down instead of
reading the environment again. The other groups (:class:`BackendSettings`, :class:`KubernetesSettings`,
:class:`SparkSettings`, :class:`TrainerSettings`, :class:`ProfilingSettings`, :class:`MLflowSettings`,
:class:`LocalFlinkSettings`, :class:`PrometheusSettings`) are read with :func:`read_group`, which
takes an optional mapping in place of ``os.environ`` (tests, pod specs) and turns a bad value into
one :class:`SettingsError` line naming the variable. Every ``FLINKTUNE_*`` variable is declared
in :mod:`flinktune.settings.groups` (or in :mod:`flinktune.pricing` / :mod:`flinktune.report.verdict` / :mod:`flinktune.signing`, also typed groups);
:func:`check_environment` warns once about any other ``FLINKTUNE_*`` name and suggests the
closest valid one. All paths default to folders under ``var_dir`` so that the embedded
default (twin, local Spark, SQLite MLflow) needs no service. Credentials never live here: the
Kubernetes and Prometheus adapters take them from Airflow connections or the environment.
"""

from __future__ import annotations

import difflib
import json
import logging
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, TypeVar

from pydantic import ValidationError
from pydantic_settings import BaseSettings

from flinktune.settings.groups import (
    PREFIX,
    BackendSettings,
    KubernetesSettings,
    LocalFlinkSettings,
    MLflowSettings,
    ProfilingSettings,
    PrometheusSettings,
    ScheduleSettings,
    Settings,
    SparkSettings,
    TimeoutSettings,
    TrainerSettings,
)
from flinktune.signing import SigningSettings

__all__ = [
    "BackendSettings",
    "KubernetesSettings",
    "LocalFlinkSettings",
    "MLflowSettings",
    "ProfilingSettings",
    "PrometheusSettings",
    "ScheduleSettings",
    "Settings",
    "SettingsError",
    "SigningSettings",
    "SparkSettings",
    "TimeoutSettings",
    "TrainerSettings",
    "check_environment",
    "known_variables",
    "load_settings",
    "read_group",
    "settings_groups",
    "variables_markdown",
    "worker_var_dir",
]

_log = logging.getLogger(__name__)
G = TypeVar("G", bound=BaseSettings)


class SettingsError(ValueError):
    """A ``FLINKTUNE_*`` variable has a bad value; the one-line message names the variable."""


def _variable(cls: type[BaseSettings], name: str) -> str:
    alias = cls.model_fields[name].validation_alias
    return alias if isinstance(alias, str) else f"{cls.model_config.get('env_prefix', '')}{name}".upper()


def read_group(cls: type[G], environ: Mapping[str, str] | None = None) -> G:
    """The settings group ``cls`` from ``environ`` (default ``os.environ``); a blank variable counts
    as unset. Raises :class:`SettingsError` naming the first bad variable (secrets never shown)."""
    env = os.environ if environ is None else environ
    data: dict[str, str] = {}
    for name in cls.model_fields:
        raw = env.get(_variable(cls, name), "")
        if raw.strip():
            data[_variable(cls, name) if cls.model_fields[name].validation_alias else name] = raw
    try:
        return cls.model_validate(data)
    except ValidationError as exc:
        raise SettingsError(_one_line(cls, exc, data)) from None


def _one_line(cls: type[BaseSettings], exc: ValidationError, data: Mapping[str, str]) -> str:
    err = exc.errors()[0]
    if not err["loc"]:  # a model-level error (pydantic-settings' own): the message says what it can
        return str(err["msg"]).removeprefix("Value error, ")
    field, rest = str(err["loc"][0]), err["loc"][1:]
    name = next((n for n in cls.model_fields if field in (n, _variable(cls, n))), field)
    var = _variable(cls, name)
    where = var + "".join(f"[{k!r}]" for k in rest if k not in ("[key]",))
    msg = str(err["msg"]).removeprefix("Value error, ")
    if err["type"] in ("dict_type", "list_type"):
        kind = "object" if err["type"] == "dict_type" else "list"
        msg = f"must be a JSON {kind}, got {type(err['input']).__name__}"
    elif err["type"] == "string_pattern_mismatch":
        pattern = str(err.get("ctx", {}).get("pattern", ""))
        msg = "must be an http(s):// URL" if "http" in pattern else f"must match {pattern}"
    elif err["type"] == "literal_error":
        msg = f"must be {err.get('ctx', {}).get('expected', 'one of the documented values')}"
    # A secret, or a URL that may carry one, is never echoed.
    hidden = "SecretStr" in str(cls.model_fields[name].annotation) or cls is PrometheusSettings
    raw = data.get(field, "")
    # A quantity's message already names the value (and its unit).
    quoted = raw and (msg.startswith(repr(raw)) or msg.startswith(raw.strip() + " "))
    shown = "" if hidden or quoted else f"={raw!r}"
    return f"{where}{shown}: {msg}"


def worker_var_dir(environ: Mapping[str, str] | None = None) -> Path | None:
    """``FLINKTUNE_VAR_DIR`` when it is set (``None`` otherwise), for callers that treat "not set"
    differently from the default ``var/`` (the CLI, the trainer pod's mount point)."""
    env = os.environ if environ is None else environ
    raw = env.get(_variable(Settings, "var_dir"), "").strip()
    return Path(raw) if raw else None


def settings_groups() -> list[type[BaseSettings]]:
    """Every typed group a ``FLINKTUNE_*`` variable is declared in: this package's, pricing's, the verdict's,
    the report's and signing's (what :func:`known_variables` and ``docs/SETTINGS.md`` list)."""
    from flinktune.pricing import PriceList
    from flinktune.report.spread import ReportSettings
    from flinktune.report.verdict import Goals

    return [
        Settings,
        TimeoutSettings,
        BackendSettings,
        KubernetesSettings,
        SparkSettings,
        TrainerSettings,
        ProfilingSettings,
        MLflowSettings,
        LocalFlinkSettings,
        PrometheusSettings,
        ScheduleSettings,
        SigningSettings,
        PriceList,
        Goals,
        ReportSettings,
    ]


#: Read by the shell scripts and tests, not by the package; known so that they draw no warning.
_TOOLING_VARIABLES = ("FLINKTUNE_VENV", "FLINKTUNE_LOCALFLINK_DIR", "FLINKTUNE_DEMETER_ADS")


def known_variables() -> dict[str, str]:
    """Every valid ``FLINKTUNE_*`` variable -> its description (``timeouts``, a nested group, excluded)."""
    out = {v: "read by scripts or tests only" for v in _TOOLING_VARIABLES}
    for cls in settings_groups():
        for name, info in cls.model_fields.items():
            if name != "timeouts":
                out[_variable(cls, name)] = info.description or ""
    return out


def _default_text(cls: type[BaseSettings], name: str) -> str:
    info = cls.model_fields[name]
    value = info.get_default(call_default_factory=True)
    if value is None or value == "":
        return "(unset)"
    return f"`{json.dumps(value) if isinstance(value, (dict, list)) else value}`"


def variables_markdown() -> str:
    """The reference table of every ``FLINKTUNE_*`` variable (name, default, meaning), as kept in
    ``docs/SETTINGS.md``; a test checks the two agree."""
    rows = ["| variable | default | meaning |", "|---|---|---|"]
    for cls in settings_groups():
        for name, info in cls.model_fields.items():
            if name != "timeouts":
                rows.append(f"| `{_variable(cls, name)}` | {_default_text(cls, name)} | {info.description or ''} |")
    return "\n".join(rows) + "\n"


_warned: set[str] = set()


def check_environment(environ: Mapping[str, str] | None = None) -> list[str]:
    """Warn (once per process and name) about each unknown ``FLINKTUNE_*`` variable, naming the
    closest valid one; returns the warnings of this call. Use at start-up (:func:`load_settings`)."""
    env = os.environ if environ is None else environ
    known = known_variables()
    warnings = []
    # Compared without the shared prefix, which would make every name look alike.
    suffixes = {k.removeprefix(PREFIX): k for k in known}
    for name in sorted(k for k in env if k.startswith(PREFIX) and k not in known and k not in _warned):
        close = difflib.get_close_matches(name.removeprefix(PREFIX), suffixes, n=1, cutoff=0.6)
        hint = f"; did you mean {suffixes[close[0]]}?" if close else ""
        warnings.append(f"unknown environment variable {name} is ignored{hint}")
        _warned.add(name)
        _log.warning(warnings[-1])
    return warnings


def load_settings(**overrides: Any) -> Settings:
    """Settings from the environment, with explicit keyword overrides taking precedence.

    This is the start-up check of every job: it warns once about unknown ``FLINKTUNE_*`` variables
    and validates every settings group, so a bad value (in any group, used or not by this job)
    raises :class:`SettingsError` before any work is done. From here on every log record is redacted
    (:mod:`flinktune.redaction`): a job run by Airflow logs no credential either."""
    from flinktune.redaction import install_log_redaction

    install_log_redaction()
    check_environment()
    for group in settings_groups():
        if group not in (Settings, TimeoutSettings):  # these two are validated by Settings itself
            read_group(group)
    try:
        return Settings(**overrides)
    except ValidationError as exc:
        # The timeouts group fails inside its default factory, so the error is titled by its class.
        group = TimeoutSettings if exc.title == TimeoutSettings.__name__ else Settings
        err = exc.errors()[0]
        field = str(err["loc"][-1])
        var = (group.model_config.get("env_prefix", "") + field).upper()
        # The field is named too (it may have come as a keyword override); no value is echoed,
        # since the tracking URI may hold a database password.
        raise SettingsError(f"{var} (settings field {field}): {str(err['msg']).removeprefix('Value error, ')}") from None
