"""What a reconfiguration would cost in each mode: savepoint redeploy, in-place rescale, live migration.

Use :func:`mode_costs` for one change (old -> new configuration at an input rate) and
:func:`reconfiguration_costs` for every change a twin carried out (``TwinJob.reconfigurations``
with its ``history()``): one row per change and mode, for the replay report's "reconfiguration
cost by mode" section. This is a what-if: the twin itself carries changes out by redeploy or
rescale (``TwinJob.apply``); the live mode is costed here only.

Modes and the approximation:

- ``redeploy`` (pause and restart): savepoint, tear down, redeploy, restore
  (:func:`flinktune.twin.mechanics.reconfiguration`). Records arriving meanwhile wait; the first
  waits the whole downtime, so the added tail latency is the downtime itself.
- ``rescale`` (in place, adaptive scheduler): parallelism-only changes; shorter pause, same
  reasoning. Not possible when other knobs change (the row says why).
- ``migrate`` (live, fine-grained state migration, after Megaphone): new workers start while the
  old ones run; the state that changes owner moves in batches of ``batch_mb`` while processing
  goes on, each batch pausing only its own keys for its transfer plus ``batch_overhead_s``. No
  downtime; the added tail latency is one batch's pause plus the wait behind the backlog the
  migration's overhead (``overhead`` of capacity while it runs) lets build. The moved state is
  ``1 - min(p_old, p_new) / max(p_old, p_new)`` of it for a parallelism change (key groups
  that change owner), all of it when TaskManager resources change, none for a checkpoint
  interval change.

Limits: steady capacity from the analytic model at the rate seen before the change; warm-up and
catch-up after the pause are not part of the added latency; Flink itself has no live mode.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from flinktune.config_space import ConfigError, Configuration
from flinktune.twin import mechanics as mech
from flinktune.twin.profile import ClusterProfile

__all__ = ["MODES", "MigrationSettings", "ModeCost", "change_priors", "failure_prior", "mode_costs", "reconfiguration_costs"]

MODES: tuple[str, ...] = ("redeploy", "rescale", "migrate")


@dataclass(frozen=True)
class MigrationSettings:
    """Live migration parameters: batch size (MB), per-batch coordination (s), capacity used while migrating."""

    batch_mb: float = 1.0
    batch_overhead_s: float = 0.05
    overhead: float = 0.1


@dataclass(frozen=True)
class ModeCost:
    """One mode's cost for one change; ``feasible`` False (with ``why``) when the mode cannot do it."""

    mode: str
    feasible: bool
    downtime_s: float
    added_latency_ms: float
    duration_s: float
    why: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in self.__dataclass_fields__}


def change_priors(profile: ClusterProfile, task_managers: int = 8) -> dict[str, tuple[float, float]]:
    """(downtime s, warm-up s) per change mode as a calibrated profile has them: the prior a tuner's
    change-cost model starts from on a job whose twin was calibrated (``task_managers``: a typical
    count for the per-TaskManager terms)."""
    rescale_warm = profile.rescale_warmup_s if profile.rescale_warmup_s is not None else profile.warmup_s
    redeploy_warm = profile.redeploy_warmup_s if profile.redeploy_warmup_s is not None else profile.warmup_s
    return {
        "rescale": (profile.rescale_base_s + profile.tm_start_s, rescale_warm),
        "redeploy": (
            profile.savepoint_base_s + profile.redeploy_base_s + profile.redeploy_per_tm_s * task_managers,
            redeploy_warm,
        ),
    }


def failure_prior(profile: ClusterProfile, task_managers: int = 8) -> tuple[float, float]:
    """(downtime s, warm-up s) of a job failure as a calibrated profile has it: detection, restart, warm-up."""
    return (
        profile.failure_detection_s + profile.restart_base_s + profile.restart_per_tm_s * task_managers,
        profile.warmup_s,
    )


def _moved_fraction(old: Configuration, new: Configuration) -> float:
    if (old.task_slots, old.cpu, old.memory_mb) != (new.task_slots, new.cpu, new.memory_mb):
        return 1.0
    return 1.0 - min(old.parallelism, new.parallelism) / max(old.parallelism, new.parallelism)


def mode_costs(
    profile: ClusterProfile,
    old: Configuration,
    new: Configuration,
    rate: float,
    migration: MigrationSettings = MigrationSettings(),
) -> dict[str, ModeCost]:
    """The cost of changing ``old`` -> ``new`` at ``rate`` rec/s in every mode of :data:`MODES`."""
    size = float(mech.state_mb(profile, rate)[0])
    out: dict[str, ModeCost] = {}
    for mode in ("redeploy", "rescale"):
        try:
            kind, down = mech.reconfiguration(profile, old, new, size, mode)
        except ConfigError as exc:
            out[mode] = ModeCost(mode, False, math.nan, math.nan, math.nan, str(exc))
            continue
        out[mode] = ModeCost(mode, True, down, 1000.0 * down, down) if kind != "noop" else ModeCost(mode, True, 0.0, 0.0, 0.0)
    moved = size * _moved_fraction(old, new) if old != new else 0.0
    batches = math.ceil(moved / migration.batch_mb) if moved > 0 else 0
    pause_s = min(migration.batch_mb, moved) / profile.restore_mb_s + migration.batch_overhead_s if batches else 0.0
    duration = batches * pause_s
    cap = float(mech.steady_state(profile, old, rate)["capacity"][0])
    # Only the capacity the migration itself takes counts: a backlog the old configuration builds anyway is not its cost.
    lost = max(0.0, min(rate, cap) - (1.0 - migration.overhead) * cap) * duration
    out["migrate"] = ModeCost("migrate", True, 0.0, 1000.0 * (pause_s + (lost / cap if cap > 0 else 0.0)), duration)
    return out


def reconfiguration_costs(
    profile: ClusterProfile,
    reconfigurations: list[dict[str, Any]],
    history: pd.DataFrame,
    migration: MigrationSettings = MigrationSettings(),
) -> pd.DataFrame:
    """One row per carried-out change and mode: ``ts, applied_mode, mode, feasible, downtime_s, added_latency_ms,
    duration_s, why``; the rate is the mean over the minute before the change."""
    cols = ["ts", "applied_mode", "mode", "feasible", "downtime_s", "added_latency_ms", "duration_s", "why"]
    rows = []
    ts = history["ts"].astype("int64").to_numpy() // 10**9 if len(history) else []
    for rec in reconfigurations:
        if rec.get("mode") == "noop":
            continue
        old = Configuration.from_dict(rec["from"], where="reconfiguration 'from'")
        new = Configuration.from_dict(rec["to"], where="reconfiguration 'to'")
        before = history["rate"].to_numpy()[(ts >= rec["ts"] - 60) & (ts < rec["ts"])] if len(history) else np.array([])
        rate = float(before.mean()) if len(before) else 0.0
        for c in mode_costs(profile, old, new, rate, migration).values():
            rows.append({"ts": rec["ts"], "applied_mode": rec.get("mode"), **c.to_dict()})
    return pd.DataFrame(rows, columns=cols)
