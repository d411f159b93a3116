"""Which back end each stage uses: the one switch between the embedded default and production.

Use :func:`load_backends` in task code (never at DAG parse time) to decide where the work runs.
Everything is read from the environment, so the same DAG files run on a laptop and on a cluster:

=========================  ==========================  =============================================
variable                   values (default first)      meaning
=========================  ==========================  =============================================
``FLINKTUNE_CLUSTER``      ``twin`` | ``kubernetes``   where decisions are applied and profiling runs
                           | ``local-flink``             (local-flink: the rehearsal, :mod:`flinktune.localflink.attach`)
``FLINKTUNE_TRAINING``     ``in_process`` |            train in the Airflow worker, or in a GPU pod
                           ``kubernetes``              (``KubernetesPodOperator``, ``dag_tasks.k8s_operators``)
``FLINKTUNE_SPARK_MASTER`` ``local[2]`` | any URL      Spark master (``flinktune.settings``)
``FLINKTUNE_SPARK_SUBMIT`` ``""`` | ``client`` |       empty: the ETL runs in the worker's Python
                           ``cluster`` |               (driver here); ``client``/``cluster``:
                           ``kubernetes``              ``spark-submit`` to a standalone master with
                                                       that deploy mode (``dag_tasks.spark_submit``);
                                                       ``kubernetes``: a SparkApplication run by
                                                       ``SparkKubernetesOperator`` (the Spark operator)
=========================  ==========================  =============================================

The two ``kubernetes`` values change the DAGs' shape (a provider operator instead of a Python task),
so the DAG files read them when parsed, as the workers do: set them the same for every Airflow component.

A bad value raises :class:`BackendError` naming the variable and the accepted values.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from flinktune.settings import BackendSettings, SettingsError, read_group

__all__ = ["CLUSTERS", "SPARK_SUBMIT_MODES", "TRAININGS", "BackendError", "Backends", "load_backends"]

CLUSTERS = ("twin", "kubernetes", "local-flink")
TRAININGS = ("in_process", "kubernetes")
SPARK_SUBMIT_MODES = ("", "client", "cluster", "kubernetes")


class BackendError(ValueError):
    """A back-end variable has a value flinktune does not know; the message names it."""


@dataclass(frozen=True)
class Backends:
    """The resolved switches; see the module docstring for what each means."""

    cluster: str = "twin"
    training: str = "in_process"
    spark_submit: str = ""

    @property
    def is_embedded(self) -> bool:
        """True when nothing leaves this machine (twin, in-process training, no spark-submit)."""
        return (self.cluster, self.training, self.spark_submit) == ("twin", "in_process", "")


def load_backends(environ: Mapping[str, str] | None = None) -> Backends:
    """The back ends named by ``environ`` (default ``os.environ``; :class:`flinktune.settings.BackendSettings`)."""
    try:
        s = read_group(BackendSettings, environ)
    except SettingsError as exc:
        raise BackendError(str(exc)) from None
    return Backends(cluster=s.cluster, training=s.training, spark_submit=s.spark_submit)
