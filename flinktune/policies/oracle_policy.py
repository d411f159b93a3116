"""The oracle (twin only): the cheapest configuration for each interval, knowing the future.

It reads a precomputed :func:`flinktune.twin.oracle.oracle_schedule` of the very trace being
replayed, so it is a lower bound for the benchmark, never a deployable policy.
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from flinktune.config_space import ConfigSpace
from flinktune.decision import Action, Decision, JobState
from flinktune.decision.stages import PolicyContext

__all__ = ["OraclePolicy"]


@dataclass
class OraclePolicy:
    """``schedule``: a frame of ``ORACLE_COLUMNS`` (``interval_start`` UTC, ``config``)."""

    space: ConfigSpace
    schedule: pd.DataFrame
    name: str = "oracle"

    def decide(self, state: JobState, context: PolicyContext) -> Decision:
        now = pd.Timestamp(state.ts, unit="s", tz="UTC")
        rows = self.schedule[(self.schedule["interval_start"] <= now) & (self.schedule["interval_end"] > now)]
        if rows.empty:
            return Decision.keep(self.name, f"the oracle schedule does not cover {now}")
        row = rows.iloc[0]
        target = row["config"]
        inputs = {"planned_rate": float(row["peak_rate"]), "feasible": bool(row["feasible"])}
        if target == state.config:
            return Decision.keep(
                self.name, f"oracle: {target.describe()} is the cheapest safe configuration until {row['interval_end']}", **inputs
            )
        return Decision(
            Action.RECONFIGURE,
            f"oracle: the true peak until {row['interval_end']} is {row['peak_rate']:,.0f} rec/s; the cheapest configuration meeting the goals "
            f"there is {target.describe()} (p95 {row['latency_ms']:.0f} ms, recovery {row['recovery_s']:.0f} s)",
            self.name,
            target=target,
            inputs=inputs,
        )
