"""Shared fixtures for the whole suite (keep this file minimal).

- ``settings``: a :class:`~flinktune.settings.Settings` whose ``var_dir`` is under ``tmp_path``,
  so every lake, MLflow store and report of a test is private to it.
- ``spark``: ONE local SparkSession for the whole test session (startup costs ~10 s; never
  stop it in a test). Built with :func:`flinktune.etl.spark.spark_session` on ``local[2]``, so
  tests run with the production settings. Mark tests that use it ``@pytest.mark.spark``.
- ``airflow_var``: ONE var folder whose ``airflow/`` home has a migrated Airflow metadata database
  for the session (``airflow db migrate`` costs ~25 s); pass it to ``airflow_env``. Tests write no
  DAG runs into it.

The suite runs on two pytest-xdist workers (``-n 2`` in pyproject.toml): session fixtures are
built once per worker, and the slow tests that start server stacks (marked ``servers``) go to one
worker (``xdist_group``), one after another. ``--dist loadgroup`` hands that group out first (it
orders work units by size) and the rest in collection order, so modules with slow tests are moved
to the front: the long ones start while the stack worker is busy, the short ones fill in at the end.
"""

from __future__ import annotations

import os

import pytest

from flinktune.settings import Settings

# GX Checkpoints with Data Docs cost seconds per batch, on every ETL run of every pipeline test;
# the tests of that feature switch it on themselves (tests/data_contracts/test_gx_checkpoint.py,
# tests/flinktune/etl/test_observations.py, tests/flinktune/report/test_report_quality.py).
os.environ.setdefault("FLINKTUNE_DATA_DOCS", "false")


@pytest.fixture
def settings(tmp_path) -> Settings:
    return Settings(var_dir=tmp_path / "var", spark_master="local[2]", spark_shuffle_partitions=2)


@pytest.fixture(scope="session")
def spark(tmp_path_factory):
    from flinktune.etl.spark import spark_session

    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    base = Settings(var_dir=tmp_path_factory.mktemp("spark-var"), spark_master="local[2]", spark_shuffle_partitions=2)
    session = spark_session(base, "flinktune-tests")
    yield session
    session.stop()


@pytest.fixture(scope="session")
def airflow_var(tmp_path_factory):
    from flinktune.orchestration.local.airflow_home import prepare_airflow_home

    var = tmp_path_factory.mktemp("airflow-var")
    prepare_airflow_home(var)
    return var


def pytest_collection_modifyitems(config, items):
    # One worker runs the tests that start whole server stacks (local Flink, Airflow's servers, the
    # rehearsal, Spark standalone), one after another: scripts/setup_local_flink.sh writes shared
    # files, and two stacks at once on two cores time out each other's servers. The e2e demo starts
    # no server (dag.test, local Spark, SQLite): it runs on the other worker, beside the stacks.
    for item in items:
        if item.get_closest_marker("servers"):
            item.add_marker(pytest.mark.xdist_group("server-stacks"))
    # Longest first (whole modules, so module fixtures are still built once per worker): the other
    # worker starts the slow non-stack tests at once instead of ending the run on one of them.
    slow_modules = {item.path for item in items if item.get_closest_marker("slow")}
    items.sort(key=lambda item: item.path not in slow_modules)
