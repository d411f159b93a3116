"""The one job-name type: a Kubernetes DNS-1123 label, checked wherever a name enters.

Use :func:`job_name` on every name that comes from outside (CLI options, ``python -m jobs.*``
arguments, DAG params, plugin requests, settings) before it reaches a file path, an MLflow model
name or a Kubernetes call; use :data:`JobName` as the type of a pydantic field. A job name becomes
part of lake partition paths (``job=<name>``), twin and report folders and model names, so only
lower-case letters, digits and inner dashes (at most 63 characters) are accepted: no ``/``, no
``..``, no absolute path can pass. :data:`JOB_NAME_PATTERN` is the same rule for places that can
only hold a regular expression (the DAGs' typed params, the plugin's path and query parameters).
"""

from __future__ import annotations

import re
from typing import Annotated

from pydantic import AfterValidator

__all__ = ["JOB_NAME_PATTERN", "JobName", "JobNameError", "job_name"]

#: A Kubernetes DNS-1123 label (RFC 1123): what a FlinkDeployment's name may be, without dots.
JOB_NAME_PATTERN = r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$"
_JOB_NAME = re.compile(JOB_NAME_PATTERN)


class JobNameError(ValueError):
    """A job name that is not a Kubernetes DNS-1123 label; the message names where it came from."""


def job_name(value: object, *, where: str = "job") -> str:
    """``value`` if it is a valid job name, else :class:`JobNameError` naming ``where`` and the rule."""
    if not isinstance(value, str) or not _JOB_NAME.fullmatch(value):
        raise JobNameError(
            f"{where} {value!r} is not a valid job name: use 1-63 lower-case letters, digits and dashes, "
            "starting and ending with a letter or digit (a Kubernetes DNS-1123 label)"
        )
    return value


JobName = Annotated[str, AfterValidator(job_name)]
"""A pydantic field type that accepts only valid job names."""
