"""Bottleneck, straggler and channel analysis: where a job's time goes (SnailTrail-style).

Start with :func:`analyse` (raw samples of one window -> :class:`CriticalityAnalysis`); the
sentence a decision quotes is :mod:`flinktune.decision.explain`'s. The approximation and its limits are documented in :mod:`flinktune.analysis.criticality` and
:mod:`flinktune.analysis.stragglers`.
"""

from flinktune.analysis.criticality import SCALING_VERDICTS, CriticalityAnalysis, analyse
from flinktune.analysis.stragglers import KEY_SKEW, SLOW_WORKER, Straggler

__all__ = ["KEY_SKEW", "SCALING_VERDICTS", "SLOW_WORKER", "CriticalityAnalysis", "Straggler", "analyse"]
