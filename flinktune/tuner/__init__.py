"""The flinktune policy (ours) and its parts; the other policies are in :mod:`flinktune.policies`.

- :mod:`~flinktune.tuner.flinktune_policy`: :class:`FlinktunePolicy`, its options, the in-place
  decisions and the memory it persists between decide runs (``make_policy("flinktune", space)``
  builds it).
- :mod:`~flinktune.tuner.shape_decisions`: the policy's decisions that pick or change the shape
  (the first one, a bigger one when outgrown, a cheaper one to save), the base of the policy class.
- :mod:`~flinktune.tuner.capacity`: measured capacity per shape (DS2-style) for in-place scaling.
- :mod:`~flinktune.tuner.shapes`, :mod:`~flinktune.tuner.shape_choice`: the shapes it chooses among
  and which one to run.
- :mod:`~flinktune.tuner.sizing`: parallelism within a shape, and the hysteresis against flapping.
- :mod:`~flinktune.tuner.selection`, :mod:`~flinktune.tuner.profiling`: surrogate-scored candidates
  and which profiling runs to ask for (the demeter baseline uses these two as well).
"""

from flinktune.tuner.flinktune_policy import FlinktunePolicy

__all__ = ["FlinktunePolicy"]
