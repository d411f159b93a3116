"""The flinktune policy (ours) and its parts; the other policies are in :mod:`flinktune.policies`.

- :mod:`~flinktune.tuner.flinktune_policy`: :class:`FlinktunePolicy`, the decisions and the memory
  it persists between decide runs (``make_policy("flinktune", space)`` builds it).
- :mod:`~flinktune.tuner.capacity`: measured capacity per shape (DS2-style) for in-place scaling.
- :mod:`~flinktune.tuner.shapes`, :mod:`~flinktune.tuner.shape_choice`: the shapes it chooses among
  and which one to run.
- :mod:`~flinktune.tuner.sizing`: parallelism within a shape, and the hysteresis against flapping.
- :mod:`~flinktune.tuner.selection`, :mod:`~flinktune.tuner.profiling`: surrogate-scored candidates
  and which profiling runs to ask for (the demeter baseline uses these two as well).
"""

from flinktune.tuner.flinktune_policy import FlinktunePolicy

__all__ = ["FlinktunePolicy"]
