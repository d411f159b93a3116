"""The benchmark job (``flinkjob/``) on a fresh local Flink cluster, started one way everywhere.

Use :func:`bench_cluster` for the cluster (state under ``<out>/cluster``, free ports, one slot and
1 GiB per TaskManager) and the rate file its job follows (``<out>/rate.txt``), then
:func:`start_bench_job` to start the cluster and deploy the benchmark jar (:data:`BENCH_JAR`,
built by ``scripts/setup_local_flink.sh``) at a configuration, and :func:`rest_source` for the
job's metrics over REST. The rehearsal, the local Flink benchmarks and the integration tests start
it through here. Stopping the cluster (``cluster.down()``) stays with the caller, in its ``finally``.
"""

from __future__ import annotations

from pathlib import Path

from flinktune.config_space import Configuration
from flinktune.localflink.cluster import ClusterSpec, LocalFlinkCluster, free_port
from flinktune.localflink.distribution import FlinkDistribution, repo_root
from flinktune.localflink.jobcontrol import JobControl, JobSpec
from flinktune.localflink.metrics import RestMetricsSource
from flinktune.localflink.realizer import LocalFlinkRealizer
from flinktune.localflink.workload import RateFile

__all__ = ["BENCH_JAR", "bench_cluster", "rest_source", "start_bench_job"]

#: Where ``scripts/setup_local_flink.sh`` builds the benchmark jar.
BENCH_JAR = repo_root() / "var" / "localflink" / "flinkjob.jar"


def bench_cluster(out: Path, *, dist: FlinkDistribution | None = None) -> tuple[LocalFlinkCluster, RateFile]:
    """The cluster under ``out / "cluster"`` (not started; ``dist`` defaults to the one found) and the
    rate file ``out / "rate.txt"``."""
    spec = ClusterSpec(rest_port=free_port(), rpc_port=free_port(), tm_slots=1, tm_memory_mb=1024)
    return LocalFlinkCluster(out / "cluster", spec, dist=dist), RateFile(out / "rate.txt")


def start_bench_job(
    cluster: LocalFlinkCluster, rate: RateFile, *, name: str, work: int, config: Configuration, rec_s: float
) -> tuple[JobControl, LocalFlinkRealizer]:
    """Start ``cluster`` (3 minutes at most), offer ``rec_s`` rec/s and deploy the benchmark job
    ``name`` (``work`` per record, 500 keys) at ``config``; its control and realizer."""
    cluster.up(timeout_s=180)
    rate.set(rec_s)
    control = JobControl(cluster.rest, JobSpec(jar=BENCH_JAR, name=name, rate_file=rate.path, work=work, keys=500))
    realizer = LocalFlinkRealizer(cluster, control, config)
    realizer.deploy()
    return control, realizer


def rest_source(control: JobControl, realizer: LocalFlinkRealizer) -> RestMetricsSource:
    """The job's metrics over REST, polled every 2 s, labelled with the configuration the realizer holds."""
    source = RestMetricsSource(control, config_provider=lambda: realizer.config)
    source.start(interval_s=2.0)
    return source
