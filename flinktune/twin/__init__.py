"""The twin: a simulated Flink job on Kubernetes, fast enough to replay 18 h in about a second.

Start with :class:`TwinJob` (simulator), :class:`ClusterProfile` (its parameters),
:func:`generate_trace` / :func:`load_trace_csv` (input rates) and :func:`profile_configs`
(profiling observations). See docs/DESIGN.md section 6. :mod:`flinktune.calibration.grey_box` fits the twin to
real profiling runs (the mechanism plus a learned correction; ``flinktune twin calibrate --group-by``).
"""

from flinktune.twin.dataflow import DataflowSpec, VertexSpec, builtin_dataflow, load_dataflow
from flinktune.twin.profile import ClusterProfile, ProfileError
from flinktune.twin.profiling import initial_design, profile_configs
from flinktune.twin.simulator import TwinJob
from flinktune.twin.workload import TraceError, generate_trace, inject_bursts, load_trace_csv

__all__ = [
    "ClusterProfile",
    "DataflowSpec",
    "ProfileError",
    "TraceError",
    "TwinJob",
    "VertexSpec",
    "builtin_dataflow",
    "generate_trace",
    "initial_design",
    "inject_bursts",
    "load_dataflow",
    "load_trace_csv",
    "profile_configs",
]
