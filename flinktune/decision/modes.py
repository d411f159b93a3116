"""Whether flinktune acts on a job or only advises: every job starts in advice.

In advice a decision is made, recorded and shown exactly as in act, and nothing is changed on the
cluster. A job acts only when someone switched it on: the fleet setting ``mode: act`` (a
``fleet.yaml`` entry, or the FlinkDeployment annotation ``flinktune.io/mode: act``) or
``flinktune fleet act JOB``, which the state store records with who and when. Advice wins: an
explicit ``advise`` from either source keeps the job advising, so ``flinktune fleet advise JOB``
always stops it. Use :func:`resolve_mode` in the decide run and the plugin page.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

__all__ = ["ACT", "ADVISE", "JobMode", "resolve_mode"]

ADVISE, ACT = "advise", "act"


@dataclass(frozen=True)
class JobMode:
    """A job's mode and where it comes from, in words (``why``)."""

    job: str
    mode: str
    why: str

    @property
    def acting(self) -> bool:
        return self.mode == ACT

    def line(self) -> str:
        """``act (switched on by alice at ...)``, or for advice how to switch."""
        if self.acting:
            return f"act ({self.why})"
        return f"advise ({self.why}; decisions are recorded, nothing is changed; act with `flinktune fleet act {self.job}`)"


def _switch_words(switch: dict[str, Any]) -> str:
    when = datetime.fromtimestamp(float(switch["set_at"]), tz=UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
    return f"`flinktune fleet {switch['mode']}` by {switch['set_by']} at {when}"


def resolve_mode(
    job: str, switch: dict[str, Any] | None, fleet_mode: str | None = None, fleet_source: str | None = None
) -> JobMode:
    """The mode of ``job`` from its recorded switch (the store's ``job_mode``) and its fleet setting.

    ``fleet_mode`` is the fleet file's or annotation's ``mode`` (None when it sets none) and
    ``fleet_source`` names where it came from."""
    where = fleet_source or "the fleet"
    if switch is not None and switch["mode"] == ADVISE:
        return JobMode(job, ADVISE, _switch_words(switch))
    if fleet_mode == ADVISE:
        return JobMode(job, ADVISE, f"mode: advise in {where}")
    if switch is not None and switch["mode"] == ACT:
        return JobMode(job, ACT, _switch_words(switch))
    if fleet_mode == ACT:
        return JobMode(job, ACT, f"mode: act in {where}")
    return JobMode(job, ADVISE, "every job starts in advice")
