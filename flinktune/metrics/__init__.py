"""Raw metric samples: their schema and whether a window of them is fit to decide on.

- :mod:`~flinktune.metrics.schema`: the long raw schema every source writes to the lake (columns,
  dtypes, metric names, units) and the profiling-observation columns.
- :mod:`~flinktune.metrics.quality`: the quality gates the decision stage holds on (stale, missing,
  non-finite, counters going back).

Import from the submodules.
"""

__all__: list[str] = []
