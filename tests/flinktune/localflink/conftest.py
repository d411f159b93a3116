"""Fixtures for the local Flink tests: the distribution (set up on demand) and the benchmark jar.

``flink_setup`` runs ``scripts/setup_local_flink.sh`` once per session (idempotent: seconds when
.venv-flink and the jar exist, about a minute from the local wheel mirror otherwise) and skips
with the reason when Java or the distribution cannot be had.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from flinktune.localflink.benchjob import BENCH_JAR
from flinktune.localflink.distribution import DistributionError, find_distribution, repo_root


@pytest.fixture(scope="session")
def flink_setup():
    if shutil.which("java") is None or shutil.which("javac") is None:
        pytest.skip("Java (JDK 17 with javac) is missing: the local Flink cluster cannot run here")
    root = repo_root()
    proc = subprocess.run(
        ["bash", str(root / "scripts" / "setup_local_flink.sh")], cwd=root, capture_output=True, text=True, timeout=480
    )
    if proc.returncode != 0:
        pytest.skip(f"scripts/setup_local_flink.sh failed (exit {proc.returncode}): {proc.stderr.strip()[-400:]}")
    try:
        dist = find_distribution()
    except DistributionError as exc:
        pytest.skip(str(exc))
    jar = BENCH_JAR
    if not jar.exists():
        pytest.skip(f"the benchmark jar {jar} was not built")
    return dist, Path(jar)
