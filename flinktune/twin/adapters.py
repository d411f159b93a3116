"""The twin behind the decision loop's stage interfaces (flinktune.decision.stages).

Use :class:`TwinMetricsSource` as the ``MetricsSource`` when the job is a twin: it serves the
samples the twin emitted (kept in memory for ``retain_s``) or, given a lake, what was written
there. Use :class:`TwinRealizer` as the ``Realizer``: it applies configurations to twins directly
and reports how (no-op, in-place rescale, savepoint redeploy) and the downtime it cost.
"""

from __future__ import annotations

from collections.abc import Mapping

import pandas as pd

from flinktune.config_space import Configuration
from flinktune.decision.reconfig import ReconfigMode
from flinktune.decision.stages import RealizeResult
from flinktune.lake import Lake
from flinktune.twin.simulator import TwinJob

__all__ = ["TwinMetricsSource", "TwinRealizer"]


def _by_job(twins: TwinJob | Mapping[str, TwinJob], job: str | None) -> dict[str, TwinJob]:
    # A single twin answers to ``job`` when given (the deployment name), else to its own name.
    if isinstance(twins, TwinJob):
        return {job or twins.job: twins}
    if job is not None:
        raise ValueError("job= names a single twin; with a mapping the keys are the job names")
    return dict(twins)


class TwinMetricsSource:
    """Raw samples of twin jobs: from the twins' own retained samples, or from a lake."""

    def __init__(
        self, twins: TwinJob | Mapping[str, TwinJob] | None = None, *, job: str | None = None, lake: Lake | None = None
    ) -> None:
        if (twins is None) == (lake is None):
            raise ValueError("TwinMetricsSource needs exactly one of twins or lake")
        self._twins = _by_job(twins, job) if twins is not None else {}
        self._lake = lake

    def fetch(self, job: str, start_ms: int, end_ms: int) -> pd.DataFrame:
        """Samples of ``job`` with ``start_ms <= ts_ms < end_ms`` in the raw schema."""
        if self._lake is not None:
            return self._lake.read_raw(job, start_ms, end_ms)
        if job not in self._twins:
            raise KeyError(f"no twin for job {job!r}; known: {sorted(self._twins)}")
        df = self._twins[job].samples(start_ms, end_ms)
        if len(df) and self._twins[job].job != job:
            df["job"] = pd.array([job] * len(df), dtype="string")
        return df


class TwinRealizer:
    """Applies configurations to twin jobs (``mode``: auto, rescale or redeploy; see ``TwinJob.apply``)."""

    def __init__(self, twins: TwinJob | Mapping[str, TwinJob], *, job: str | None = None, mode: str = "auto") -> None:
        self._twins = _by_job(twins, job)
        self.mode = mode

    def _twin(self, job: str) -> TwinJob:
        if job not in self._twins:
            raise KeyError(f"no twin for job {job!r}; known: {sorted(self._twins)}")
        return self._twins[job]

    def current(self, job: str) -> Configuration:
        return self._twin(job).config

    def apply(self, job: str, config: Configuration) -> RealizeResult:
        twin = self._twin(job)
        before = twin.config
        downtime = twin.apply(config, mode=self.mode)
        rec = twin.last_reconfiguration or {}
        kind = str(rec.get("mode", "noop"))  # the twin's mechanics: noop, rescale or redeploy
        if kind == "noop":
            return RealizeResult(
                changed=False, mode=ReconfigMode.NOOP, downtime_s=0.0, detail=f"already running {before.describe()}"
            )
        mode = {"rescale": ReconfigMode.IN_PLACE, "restart": ReconfigMode.RESTART}.get(kind, ReconfigMode.REDEPLOY)
        return RealizeResult(
            changed=True,
            mode=mode,
            downtime_s=downtime,
            detail=f"{before.describe()} -> {config.describe()} ({mode}, {downtime:.1f} s down)",
        )
