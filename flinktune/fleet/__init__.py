"""Many jobs under one flinktune: the fleet registry and running a step for each job in isolation."""

from flinktune.fleet.each import JobOutcome, for_each_job
from flinktune.fleet.registry import (
    ANNOTATION_PREFIX,
    MANAGED_LABEL,
    Fleet,
    FleetEntry,
    FleetError,
    JobSettings,
    discover_flinkdeployments,
    load_fleet_file,
)

__all__ = [
    "ANNOTATION_PREFIX",
    "MANAGED_LABEL",
    "Fleet",
    "FleetEntry",
    "FleetError",
    "JobOutcome",
    "JobSettings",
    "discover_flinkdeployments",
    "for_each_job",
    "load_fleet_file",
]
