"""Drive a decision loop on a simulated cluster: run it one interval in watch-sized steps, let the
watch decide early between them, then make the interval's scheduled decision. Use
:class:`TwinDriver` wherever the twin stands in for a cluster (``jobs.decide`` on the twin, the
replay harness): both step the twin, move the loop's clock with it and watch between decisions the
same way, so a decide run per tick makes the replay's decisions.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Protocol

import numpy as np
import pandas as pd

from flinktune.clock import ManualClock
from flinktune.decision.loop import DecisionLoop, StepOutcome
from flinktune.decision.watch import WatchRule, step_if_alarmed, watch_chunks

__all__ = ["SimulatedCluster", "TwinDriver"]


class SimulatedCluster(Protocol):
    """A cluster that runs when told to (the twin): one second per rate, its raw samples returned."""

    @property
    def now(self) -> int: ...

    def run(self, rates: np.ndarray) -> pd.DataFrame: ...


@dataclass
class TwinDriver:
    """Runs ``twin`` under ``loop``: ``clock`` (the loop's) follows the twin; ``watch`` (None: off)
    checks every ``watch.every_s`` seconds within an interval; ``sink`` receives each run's raw
    samples (``jobs.decide`` writes them to the raw lake its loop reads)."""

    twin: SimulatedCluster
    clock: ManualClock
    loop: DecisionLoop
    watch: WatchRule | None = None
    sink: Callable[[pd.DataFrame], object] | None = None

    def run_interval(self, rates: np.ndarray, interval: int) -> Iterator[StepOutcome]:
        """Run the twin over ``rates`` (one decision interval of ``interval`` seconds; fewer at the end
        of a trace), yielding each early decision the watch asked for as it is made (a caller can
        save the twin at once). The watch never looks at the interval's last second: the scheduled
        decision (:meth:`decide`) is made there."""
        done = 0
        for chunk in watch_chunks(interval, self.watch.every_s if self.watch is not None else 0):
            samples = self.twin.run(rates[done : done + chunk])
            if self.sink is not None:
                self.sink(samples)
            done += chunk
            self.clock.set(self.twin.now)
            if self.watch is not None and done < len(rates):
                early = step_if_alarmed(self.loop, self.clock.now(), self.watch)
                if early is not None:
                    yield early

    def decide(self) -> StepOutcome:
        """The interval's scheduled decision, now."""
        return self.loop.step()
