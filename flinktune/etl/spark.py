"""One SparkSession per process for the ETL jobs, local by default, a cluster by configuration only.

Use :func:`spark_session` in every job that needs Spark; it returns the running session if there is
one (``getOrCreate``), so tests and jobs share it. The master comes from ``settings.spark_master``
(``local[2]`` by default; ``spark://...`` or ``k8s://...`` for a cluster). Extra Spark properties
come from the environment variable ``FLINKTUNE_SPARK_CONF``, a JSON object of string keys, e.g.
``{"spark.executor.memory": "4g"}``; they override the local defaults set here.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import TYPE_CHECKING

from flinktune.settings import Settings, SettingsError, SparkSettings, read_group

if TYPE_CHECKING:  # pyspark is heavy; import it only when a session is made
    from pyspark.sql import SparkSession

__all__ = ["SPARK_CONF_ENV", "SparkConfError", "spark_conf", "spark_session"]

#: Environment variable holding extra Spark properties as a JSON object.
SPARK_CONF_ENV = "FLINKTUNE_SPARK_CONF"


class SparkConfError(ValueError):
    """``FLINKTUNE_SPARK_CONF`` is not a JSON object of scalars; the message says what is wrong."""


def _extra_conf(environ: Mapping[str, str] | None) -> dict[str, str]:
    try:
        return read_group(SparkSettings, environ).properties()
    except SettingsError as exc:
        raise SparkConfError(str(exc)) from None


def spark_conf(settings: Settings, environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The Spark properties :func:`spark_session` applies (local defaults, then ``FLINKTUNE_SPARK_CONF``)."""
    conf = {
        "spark.sql.session.timeZone": "UTC",
        "spark.sql.shuffle.partitions": str(settings.spark_shuffle_partitions),
        "spark.default.parallelism": str(settings.spark_shuffle_partitions),
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        # The ETL reads small per-hour files and emits per-minute rows: adaptive coalescing helps.
        "spark.sql.adaptive.enabled": "true",
        "spark.sql.parquet.int96RebaseModeInWrite": "CORRECTED",
        "spark.sql.parquet.datetimeRebaseModeInWrite": "CORRECTED",
    }
    if settings.spark_driver_java_options.strip():
        # Read when this process launches the driver JVM; a driver already running (cluster mode) ignores it.
        conf["spark.driver.extraJavaOptions"] = settings.spark_driver_java_options.strip()
    if settings.spark_master.startswith("local"):
        # Local mode: the driver is the executor; keep it modest and never listen beyond loopback.
        conf.update(
            {
                "spark.driver.memory": "2g",
                "spark.driver.host": "127.0.0.1",
                "spark.driver.bindAddress": "127.0.0.1",
            }
        )
    conf.update(_extra_conf(environ))
    return conf


def spark_session(settings: Settings, app_name: str = "flinktune-etl") -> SparkSession:
    """The process's SparkSession (created on first call, reused after; ``app_name`` names a new one)."""
    from pyspark.sql import SparkSession

    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    builder = SparkSession.builder.master(settings.spark_master).appName(app_name)
    for key, value in spark_conf(settings).items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    return spark
