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
built once per worker, and the slow tests that start server stacks (marked ``servers``) and the
e2e demo go to one worker (``xdist_group``), one after another. ``--dist loadgroup`` hands that
group out first (it orders work units by size) and the rest in collection order, so the modules with
slow tests are moved to the front: they start on the other worker while the stacks run.
"""

from __future__ import annotations

import os
import tempfile

# One thread per worker for BLAS and torch, set before anything imports numpy or torch (subprocesses
# inherit it): the suite already runs two workers on two cores, and on the small matrices of the tests
# a second thread only waits (measured alone: the 20-seed RGPE regret test 49 s -> 17 s).
for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import gpytorch  # noqa: E402, F401  (imported once here, in the main thread: two threads of a worker importing linear_operator at once deadlocked on its module locks)
import pytest  # noqa: E402

from flinktune.settings import Settings  # noqa: E402

# GX Checkpoints with Data Docs cost seconds per batch, on every ETL run of every pipeline test;
# the tests of that feature switch it on themselves (tests/data_contracts/test_gx_checkpoint.py,
# tests/flinktune/etl/test_observations.py, tests/flinktune/report/test_report_quality.py).
os.environ.setdefault("FLINKTUNE_DATA_DOCS", "false")
# Every new Airflow home of the suite (the demo's, the pipelines', the DAG tests') starts from one migrated database
# per Airflow version instead of migrating its own; tests of the migration itself unset it.
os.environ.setdefault(
    "FLINKTUNE_AIRFLOW_DB_CACHE", os.path.join(tempfile.gettempdir(), f"flinktune-tests-{os.getuid()}", "airflow-db")
)
# Model files are signed (flinktune.signing): the suite signs with a key of its own, never the user's.
os.environ.setdefault(
    "FLINKTUNE_SIGNING_KEY_FILE", os.path.join(tempfile.gettempdir(), f"flinktune-tests-{os.getuid()}", "signing.key")
)


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
    from flinktune.airflow_local.airflow_home import prepare_airflow_home

    var = tmp_path_factory.mktemp("airflow-var")
    prepare_airflow_home(var)
    return var


def _join_group(config: pytest.Config, item: pytest.Item, group: str) -> None:
    """Put ``item`` in the xdist group ``group``. pytest-xdist 3.8 tags the group as a "@group"
    nodeid suffix by writing ``item._nodeid``, which pytest 9.2 no longer reads (the nodeid is
    ``str(item._id)``): the group was silently ignored and stacks ran on both workers at once
    (pytest-dev/pytest-xdist#1386). Tag the id pytest reads; a fixed xdist appends the same suffix
    again, and its scheduler splits on the last "@", so the group stays the same."""
    if not item.get_closest_marker("xdist_group"):
        item.add_marker(pytest.mark.xdist_group(group))
    node_id = getattr(item, "_id", None)
    loadgroup = getattr(config.option, "loadgroup", False)  # an xdist worker under --dist loadgroup
    if loadgroup and node_id is not None and not str(node_id).endswith(f"@{group}"):
        item._id = type(node_id).parse(f"{node_id}@{group}")


def pytest_collection_modifyitems(config, items):
    # One worker runs the tests that start whole server stacks (local Flink, Airflow's servers, the
    # rehearsal, Spark standalone), one after another: scripts/setup_local_flink.sh writes shared
    # files, and two stacks at once on two cores time out each other's servers. The e2e demo starts
    # no server but runs the whole pipeline (dag.test, local Spark, MLflow): beside the rehearsal
    # both took about 735 s, against about 165 s for the demo alone, so it joins that queue too.
    # A module that builds a costly module fixture for several tests names its own group (a
    # ``pytest.mark.xdist_group`` in its ``pytestmark``), so one worker builds it once.
    for item in items:
        if item.get_closest_marker("servers") or item.get_closest_marker("e2e"):
            _join_group(config, item, "server-stacks")
        elif (own := item.get_closest_marker("xdist_group")) is not None:
            _join_group(config, item, str(own.kwargs.get("name", own.args[0] if own.args else "default")))
    # Longest first: the e2e tests (the demo, then the stacks; all in the stack group), then modules
    # with slow tests (whole modules, so module fixtures are still built once per worker): the other
    # worker starts them while the stack worker runs its group, and short tests fill in at the end. (The stack worker queues up to two
    # more units behind its group once its first stack test ends.)
    slow_modules = {item.path for item in items if item.get_closest_marker("slow")}
    items.sort(key=lambda item: (item.get_closest_marker("e2e") is None, item.path not in slow_modules))
