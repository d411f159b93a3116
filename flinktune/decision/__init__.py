"""The decision stage: collect -> evaluate -> plan -> guard -> realize -> store, with durable memory.

Modules, by concept:

- :mod:`~flinktune.decision.decision`: what a policy decides (:class:`Action`, :class:`Decision`) and
  the evaluated state it decides from (:class:`JobState`, :class:`VertexMetrics`); exported here.
- :mod:`~flinktune.decision.stages`: the stage Protocols (metrics source, forecast, models,
  profiler, policy, guard, realizer, state store).
- :mod:`~flinktune.decision.backend`: what a cluster gives the loop (:class:`~flinktune.decision.backend.Backend`).
- :mod:`~flinktune.decision.evaluation`: raw samples of a window -> :class:`JobState`.
- :mod:`~flinktune.decision.explain`: the bottleneck sentence every decision's reason quotes.
- :mod:`~flinktune.decision.guard`: the safety review, which has the last word.
- :mod:`~flinktune.decision.loop`: :class:`~flinktune.decision.loop.DecisionLoop` and the one
  :func:`~flinktune.decision.loop.build_decision_loop` every caller uses.
- :mod:`~flinktune.decision.store`: decisions, forecasts and policy memory, durable.
- :mod:`~flinktune.decision.reconfig`: the one in-place rule and :class:`~flinktune.decision.reconfig.ReconfigMode`.
- :mod:`~flinktune.decision.testing`: stage implementations for tests of other stages.

Only the decision types are imported here: the policies and the analysis import them, and the
loop imports those (importing the loop here would be a cycle).
"""

from flinktune.decision.decision import Action, Decision, JobState, VertexMetrics

__all__ = ["Action", "Decision", "JobState", "VertexMetrics"]
