"""A decide run's ticks on the twin: the persisted twin and its trace, run one interval per tick
through :class:`~flinktune.decision.twin_driver.TwinDriver` (the replay's loop), the twin saved
after every decision. Use :meth:`TwinRun.open` in a decide run under ``FLINKTUNE_CLUSTER=twin``; its
:meth:`TwinRun.ticks` writes the twin's samples to the raw lake the loop reads, as the extractor
does on a real cluster.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd

from flinktune.backends import Backend
from flinktune.clock import ManualClock
from flinktune.decision.loop import DecisionLoop
from flinktune.decision.stages import Profiler, StateStore
from flinktune.decision.twin_driver import TwinDriver
from flinktune.decision.watch import WATCHED_POLICIES, WatchRule
from flinktune.lake import Lake, LakeMetricsSource
from flinktune.runs.decide_cluster import summary_row
from flinktune.settings import Settings
from flinktune.twin.backend import twin_backend
from flinktune.twin.job_store import TRACE_FILE, TWIN_FILE, job_dir
from flinktune.twin.reconfig_modes import change_priors, failure_prior
from flinktune.twin.simulator import TwinJob

if TYPE_CHECKING:  # the replay's models load only for a run from a file
    from flinktune.replay.models import ReplayModels, TraceForecast

__all__ = ["TwinRun"]


@dataclass
class TwinRun:
    """One job's twin (``twin.json``) and trace (``trace.parquet``) under the twin folder."""

    job: str
    twin_path: Path
    twin: TwinJob
    trace: pd.Series
    clock: ManualClock | None = None

    @classmethod
    def open(cls, settings: Settings, job: str) -> TwinRun:
        """The job's persisted twin; FileNotFoundError naming the folder when ``jobs.simulate`` has not run."""
        folder = job_dir(settings.twin_dir, job)  # type: ignore[arg-type]  # filled by the settings' validator
        twin_path, trace_path = folder / TWIN_FILE, folder / TRACE_FILE
        if not twin_path.exists() or not trace_path.exists():
            raise FileNotFoundError(f"no twin for job {job!r} under {folder}; run jobs.simulate first")
        return cls(job, twin_path, TwinJob.load(twin_path), pd.read_parquet(trace_path)["rate"])

    def reload(self) -> None:
        """The twin as saved now (read again under the decider lock: an earlier run may have saved it)."""
        self.twin = TwinJob.load(self.twin_path)

    def backend(self, lake: Lake, profiler: Profiler) -> Backend:
        """The twin as the loop's cluster: it reads the raw lake the ticks write, on a clock that follows the twin."""
        self.clock = ManualClock(self.twin.now)
        return twin_backend(self.twin, self.clock, job=self.job, source=LakeMetricsSource(lake), profiler=profiler)

    def change_priors(self) -> dict[str, Any]:
        """The flinktune policy's change-cost and failure priors from the twin's calibration, as in the replay."""
        return {"change_priors": change_priors(self.twin.profile), "failure_prior": failure_prior(self.twin.profile)}

    def trace_forecast(self, models: ReplayModels, horizon_s: int) -> TraceForecast:
        """The replay's forecast from the twin's trace, for models from a saved ``ReplayModels``."""
        from flinktune.replay.models import TraceForecast

        return TraceForecast(models, self.trace, horizon_s)

    def ticks(
        self,
        loop: DecisionLoop,
        ticks: int,
        *,
        policy: str,
        settings: Settings,
        lake: Lake,
        store: StateStore,
        models: ReplayModels | None = None,
        models_file: Path | None = None,
    ) -> list[dict[str, Any]]:
        """Run ``ticks`` decision intervals of the trace, each ending in a decision; the summaries, early ones included."""
        assert self.clock is not None, "backend() first: the loop runs on the twin's clock"
        every = settings.watch_every_s if policy in WATCHED_POLICIES else 0
        driver = TwinDriver(
            self.twin, self.clock, loop, watch=WatchRule(every_s=every) if every > 0 else None, sink=lake.write_raw
        )
        interval, job, twin, summaries = settings.decision_interval_s, self.job, self.twin, []
        for i in range(ticks):
            start = pd.Timestamp(twin.now, unit="s", tz="UTC")
            rates = self.trace[(self.trace.index >= start) & (self.trace.index < start + pd.Timedelta(seconds=interval))]
            if len(rates) < interval:
                raise ValueError(
                    f"the twin's trace for job {job!r} ends at {self.trace.index[-1]}: not enough left for tick {i + 1} of "
                    f"{ticks} ({len(rates)} of {interval} s); simulate a longer trace"
                )
            for early in driver.run_interval(rates.to_numpy(), interval):
                twin.save(self.twin_path)
                summaries.append(summary_row(early, twin.now, early=True))
                print(f"[decide {i + 1}/{ticks}, early] {summaries[-1]['action']}: {summaries[-1]['reason']}", flush=True)
            decided = store.decisions(job, limit=1)
            if not decided.empty and float(decided["ts"].iloc[-1]) >= twin.now:
                # A run killed after this tick's decision was stored but before the twin was saved: the tick is
                # decided already. Deciding it again would duplicate it; the next tick's reconciliation records
                # any difference between the stored outcome and the twin (which lost the change with the kill).
                twin.save(self.twin_path)
                summaries.append(
                    {
                        "ts": self.clock.now(),
                        "action": "skipped",
                        "reason": f"tick at t={twin.now:.0f} already decided (decision {int(decided['id'].iloc[-1])})",
                        "changed": False,
                    }
                )
                print(f"[decide {i + 1}/{ticks}] {summaries[-1]['reason']}", flush=True)
                continue
            outcome = driver.decide()
            twin.save(self.twin_path)  # per tick, after its decision: a kill never makes a later run decide a tick twice
            if models is not None and models_file is not None:
                models.save(models_file)  # a profiling decision refitted the surrogate
            summaries.append(summary_row(outcome, self.clock.now()))
            print(f"[decide {i + 1}/{ticks}] {outcome.line()}", flush=True)
        return summaries
