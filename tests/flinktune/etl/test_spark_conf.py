"""Spark properties: local defaults from settings, overrides from FLINKTUNE_SPARK_CONF, clear errors."""

from __future__ import annotations

import pytest

from flinktune.etl.spark import SPARK_CONF_ENV, SparkConfError, spark_conf
from flinktune.settings import Settings


def test_local_defaults_bind_loopback_and_follow_settings(tmp_path):
    conf = spark_conf(Settings(var_dir=tmp_path, spark_shuffle_partitions=3), environ={})
    assert conf["spark.sql.session.timeZone"] == "UTC"
    assert conf["spark.sql.shuffle.partitions"] == "3"
    assert conf["spark.driver.bindAddress"] == "127.0.0.1" and conf["spark.ui.enabled"] == "false"


def test_cluster_master_gets_no_local_binding_and_env_overrides(tmp_path):
    settings = Settings(var_dir=tmp_path, spark_master="spark://10.0.0.5:7077")
    conf = spark_conf(settings, environ={SPARK_CONF_ENV: '{"spark.executor.memory": "4g", "spark.ui.enabled": true}'})
    assert "spark.driver.bindAddress" not in conf
    assert conf["spark.executor.memory"] == "4g" and conf["spark.ui.enabled"] == "true"


@pytest.mark.parametrize(
    "raw, fragment", [("{oops", "not valid JSON"), ("[1]", "JSON object"), ('{"a": {"b": 1}}', "property 'a'")]
)
def test_bad_env_conf_is_named(tmp_path, raw, fragment):
    with pytest.raises(SparkConfError, match=fragment):
        spark_conf(Settings(var_dir=tmp_path), environ={SPARK_CONF_ENV: raw})


def test_driver_jvm_options_follow_the_setting_and_empty_leaves_the_jvm_default(tmp_path):
    assert spark_conf(Settings(var_dir=tmp_path), environ={})["spark.driver.extraJavaOptions"] == "-XX:TieredStopAtLevel=1"
    assert "spark.driver.extraJavaOptions" not in spark_conf(
        Settings(var_dir=tmp_path, spark_driver_java_options=" "), environ={}
    )


@pytest.mark.spark
def test_the_driver_jvm_the_session_started_runs_with_the_options(spark):
    # pyspark hands the session's properties to the JVM it launches: the option is on the driver's command line.
    bean = spark.sparkContext._jvm.java.lang.management.ManagementFactory.getRuntimeMXBean()
    assert "-XX:TieredStopAtLevel=1" in list(bean.getInputArguments())
