"""Find the Flink distribution and the JDK the local cluster runs on.

Use :func:`find_distribution` before anything starts a process: it says clearly what is missing
(Java, the ``.venv-flink`` environment made by ``scripts/setup_local_flink.sh``, the benchmark
jar) instead of letting a shell script fail half-way. The distribution is the one the
``apache-flink`` PyPI package bundles (``site-packages/pyflink`` is a complete ``FLINK_HOME``);
it lives in its own virtual environment so PyFlink never enters the main one.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

__all__ = ["FLINK_VERSION", "DistributionError", "FlinkDistribution", "find_distribution", "repo_root"]

FLINK_VERSION = "2.3.0"


class DistributionError(RuntimeError):
    """Java, the Flink distribution or the benchmark jar is missing; the message says how to get it."""


def repo_root() -> Path:
    """The repository root (the folder holding ``scripts/`` and ``flinkjob/``)."""
    return Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class FlinkDistribution:
    """A usable Flink installation: ``home`` (FLINK_HOME), the ``java`` binary and its major version."""

    home: Path
    java: Path
    java_major: int

    @property
    def bin(self) -> Path:
        return self.home / "bin"

    @property
    def lib(self) -> Path:
        return self.home / "lib"


def _java_major(java: Path) -> int:
    out = subprocess.run([str(java), "-version"], capture_output=True, text=True, timeout=30)
    text = out.stderr + out.stdout
    for token in text.replace('"', " ").split():
        head = token.split(".")[0]
        if head.isdigit() and int(head) >= 8 and "." in token:
            return int(head)
    raise DistributionError(f"cannot read the Java version from `{java} -version`: {text.strip()[:200]!r}")


def find_distribution(home: str | Path | None = None, *, venv: str | Path | None = None) -> FlinkDistribution:
    """Locate FLINK_HOME and Java, or raise :class:`DistributionError` naming what is missing.

    Looks, in order, at ``home``, ``$FLINKTUNE_FLINK_HOME``, and ``<venv>/lib/python3.11/site-packages/pyflink``
    (``venv`` defaults to ``$FLINKTUNE_FLINK_VENV`` or ``<repo>/.venv-flink``).
    """
    java_env = os.environ.get("JAVA_HOME")
    java = Path(java_env) / "bin" / "java" if java_env and (Path(java_env) / "bin" / "java").exists() else None
    if java is None:
        found = shutil.which("java")
        if found is None:
            raise DistributionError(
                "Java is missing: the local Flink cluster needs a JDK 17 on PATH or JAVA_HOME (apt-get install openjdk-17-jdk-headless)"
            )
        java = Path(found)
    major = _java_major(java)
    if major < 11:
        raise DistributionError(f"{java} is Java {major}; Flink {FLINK_VERSION} needs Java 11 or newer (17 recommended)")

    from flinktune.settings import LocalFlinkSettings, read_group

    local = read_group(LocalFlinkSettings)
    candidates: list[Path] = []
    if home is not None:
        candidates.append(Path(home))
    elif local.home is not None:
        candidates.append(local.home)
    else:
        v = Path(venv or local.venv or repo_root() / ".venv-flink")
        candidates.extend(sorted((v / "lib").glob("python3*/site-packages/pyflink")))
        if not candidates:
            raise DistributionError(
                f"no Flink distribution: {v} has no site-packages/pyflink; run scripts/setup_local_flink.sh "
                f"(it creates .venv-flink with apache-flink=={FLINK_VERSION}) or set FLINKTUNE_FLINK_HOME"
            )
    for c in candidates:
        dist_jar = c / "lib" / f"flink-dist-{FLINK_VERSION}.jar"
        if not (c / "bin" / "jobmanager.sh").exists() or not dist_jar.exists():
            raise DistributionError(
                f"{c} is not a Flink {FLINK_VERSION} distribution: missing bin/jobmanager.sh or {dist_jar.name}"
            )
    return FlinkDistribution(home=candidates[0].resolve(), java=java, java_major=major)
