"""The ``flinktune_ingest`` DAG's trigger parameters (besides ``job``), kept out of the DAG file so that it
stays wiring. Use :func:`ingest_params` in the DAG's ``params``; Airflow checks a trigger's conf
against them before any task runs."""

from __future__ import annotations

from datetime import timedelta

from airflow.sdk import Param

__all__ = ["ingest_params"]


def ingest_params(every: timedelta) -> dict[str, Param]:
    """``metrics_source``, the twin's ``workload``, ``hours`` (default: one schedule period of ``every``),
    ``seed`` and ``trace_file``, the ``start_ms``/``end_ms`` window and the Prometheus ``conn_id``."""
    return {
        "metrics_source": Param(
            "", enum=["", "twin", "lake", "prometheus"], title="Metrics source",
            description="twin: simulate the job here; lake: raw metrics are already in the lake (the decision "
            "task on the twin writes them as it runs); prometheus: metrics come from the real cluster; "
            "empty: twin on the twin (FLINKTUNE_CLUSTER=twin), prometheus on a real cluster.",
        ),
        "workload": Param(
            "ysb", type="string", pattern=r"^[a-z0-9][a-z0-9_-]{0,62}$", title="Twin workload",
            description="Input-rate workload the twin replays (twin only).",
        ),
        "hours": Param(
            every.total_seconds() / 3600, type="number", exclusiveMinimum=0, maximum=48,
            title="Hours to simulate", description="Simulated time per run (twin only); default: one schedule period.",
        ),
        "seed": Param(7, type="integer", minimum=0, title="Seed", description="Twin random seed (twin only)."),
        "trace_file": Param(
            "", type="string", title="Trace file",
            description="CSV input-rate trace to replay instead of the workload (twin only); empty: generate one.",
        ),
        "start_ms": Param(None, type=["null", "integer"], minimum=0, title="From (epoch ms)",
                          description="Curate raw data from this time when not simulating; empty: all of it."),
        "end_ms": Param(None, type=["null", "integer"], minimum=0, title="To (epoch ms)",
                        description="Curate raw data up to this time when not simulating; empty: all of it."),
        "conn_id": Param("", type="string", title="Prometheus connection",
                         description="Airflow connection of Prometheus (prometheus only); empty: FLINKTUNE_PROMETHEUS_*."),
    }  # fmt: skip
