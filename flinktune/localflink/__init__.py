"""A real Flink on this machine: a standalone session cluster on 127.0.0.1 and the parts that drive it.

- ``distribution``: find FLINK_HOME (bundled in the ``apache-flink`` package, in ``.venv-flink``) and Java;
- ``cluster``: start/stop/status of the JobManager and TaskManagers by PID, state under ``var/localflink``;
- ``rest`` / ``jobcontrol``: REST calls; submit, stop-with-savepoint, in-place rescale;
- ``metrics``: a ``MetricsSource`` over REST producing the raw schema;
- ``realizer``: a ``Realizer`` (in-place rescale or savepoint redeploy, measured downtime);
- ``failures``: kill a TaskManager by PID, replace it, time the recovery;
- ``workload``: the rate file the benchmark job follows and the loop benchmark's rate plan;
- ``saturation`` / ``profiling``: capacity from a short ramp to saturation (pure analysis / live steps);
- ``capacity``: the measured capacity surrogate and the profiled cap on the policy's capacity model;
- ``profiler``: profiling in the decision loop (the gate that asks for it, the profiler that runs it);
- ``audit``: whether each reconfiguration of a run was correct; ``cpu``: machine vs cluster CPU;
- ``benchjob``: the benchmark job on a fresh cluster, as the rehearsal, benchmarks and tests start it;
- ``cli``: the functions behind ``flinktune local-flink up|down|status``.
"""

from flinktune.localflink.cli import cli_down, cli_status, cli_up
from flinktune.localflink.cluster import ClusterError, ClusterSpec, LocalFlinkCluster, PortTakenError, free_port
from flinktune.localflink.distribution import DistributionError, FlinkDistribution, find_distribution
from flinktune.localflink.failures import RecoveryResult, inject_taskmanager_failure, kill_taskmanager
from flinktune.localflink.jobcontrol import JobControl, JobControlError, JobSpec
from flinktune.localflink.metrics import RestMetricsSource
from flinktune.localflink.realizer import LocalFlinkRealizer
from flinktune.localflink.rest import FlinkRest, RestError
from flinktune.localflink.workload import RateFile, RatePlan, rise_and_fall

__all__ = [
    "ClusterError",
    "ClusterSpec",
    "DistributionError",
    "FlinkDistribution",
    "FlinkRest",
    "JobControl",
    "JobControlError",
    "JobSpec",
    "LocalFlinkCluster",
    "LocalFlinkRealizer",
    "PortTakenError",
    "RateFile",
    "RatePlan",
    "RecoveryResult",
    "RestError",
    "RestMetricsSource",
    "cli_down",
    "cli_status",
    "cli_up",
    "find_distribution",
    "free_port",
    "inject_taskmanager_failure",
    "kill_taskmanager",
    "rise_and_fall",
]
