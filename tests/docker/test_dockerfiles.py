"""The Dockerfiles pass the project's lint rules, and the linter catches each rule it claims."""

from __future__ import annotations

import importlib.util
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

DOCKER = Path(__file__).resolve().parents[2] / "docker"
_spec = importlib.util.spec_from_file_location("dockerfile_lint", DOCKER / "dockerfile_lint.py")
dockerfile_lint = importlib.util.module_from_spec(_spec)
sys.modules["dockerfile_lint"] = dockerfile_lint  # dataclasses look their module up there
_spec.loader.exec_module(dockerfile_lint)


@pytest.mark.parametrize("name", ["Dockerfile.airflow", "Dockerfile.spark-job", "Dockerfile.trainer"])
def test_project_dockerfiles_are_clean(name: str) -> None:
    assert dockerfile_lint.lint(DOCKER / name) == []


def test_every_project_image_installs_the_project_and_names_its_role() -> None:
    for name in ("Dockerfile.airflow", "Dockerfile.spark-job", "Dockerfile.trainer"):
        text = (DOCKER / name).read_text()
        assert "torch==2.13.0" in text and "COPY" in text and "pip install" in text, name


BAD = """\
FROM python
ADD https://example.com/tool.tgz /opt/
ADD local.txt /opt/
RUN apt-get update && apt-get install -y curl
RUN pip install requests \\
    && echo done
FROM ubuntu:latest AS final
USER root
"""


def test_linter_reports_each_rule_with_file_and_line(tmp_path: Path) -> None:
    path = tmp_path / "Dockerfile"
    path.write_text(BAD)
    found = {(f.line, f.rule) for f in dockerfile_lint.lint(path)}
    assert found == {
        (1, "pinned-base"),
        (2, "no-add-url"),
        (3, "copy-not-add"),
        (4, "apt-hygiene"),
        (5, "pip-no-cache"),
        (7, "pinned-base"),
        (7, "user-set"),
        (7, "base-python"),
    }
    proc = subprocess.run([sys.executable, str(DOCKER / "dockerfile_lint.py"), str(path)], capture_output=True, text=True)
    assert proc.returncode == 1 and f"{path}:2: no-add-url:" in proc.stdout


def test_linter_accepts_digests_args_and_a_non_root_user(tmp_path: Path) -> None:
    path = tmp_path / "Dockerfile"
    path.write_text("ARG BASE=python:3.11.14-slim-bookworm\nFROM alpine@sha256:" + "a" * 64 + "\nFROM ${BASE}\nUSER 10001\n")
    assert dockerfile_lint.lint(path) == []


# The two ways the images broke: a Spark base whose Python is older than requires-python, with an
# ENTRYPOINT that replaces Spark's; and a CUDA base whose distribution has no python3.11.
BROKEN_SPARK_JOB = """\
FROM apache/spark:4.1.1-python3
USER root
RUN pip install --no-cache-dir .
USER spark
ENTRYPOINT ["python", "-m", "jobs.etl_features"]
"""
BROKEN_TRAINER = """\
FROM nvidia/cuda:12.6.3-cudnn-runtime-ubuntu24.04
RUN apt-get update && apt-get install -y --no-install-recommends python3.11 && rm -rf /var/lib/apt/lists/*
USER 10001
"""


def _lint_text(tmp_path: Path, text: str, spec: str | None = None) -> set[tuple[int, str]]:
    path = tmp_path / "Dockerfile"
    path.write_text(text)
    return {(f.line, f.rule) for f in dockerfile_lint.lint(path, python_spec=spec)}


def test_a_spark_base_with_an_older_python_and_its_own_entrypoint_fails_both_rules(tmp_path: Path) -> None:
    assert _lint_text(tmp_path, BROKEN_SPARK_JOB) == {(1, "base-python"), (5, "spark-entrypoint")}
    found = dockerfile_lint.lint(tmp_path / "Dockerfile")
    assert "runs Python 3.10, outside requires-python '>=3.11,<3.12'" in str(found[0])
    # The same base with Spark's entrypoint left alone passes the entrypoint rule (Python 3.10 still fails).
    kept = BROKEN_SPARK_JOB.replace('ENTRYPOINT ["python", "-m", "jobs.etl_features"]', 'ENTRYPOINT ["/opt/entrypoint.sh"]')
    assert _lint_text(tmp_path, kept) == {(1, "base-python")}
    assert _lint_text(tmp_path, kept, spec=">=3.10") == set()


def test_a_cuda_base_whose_distribution_has_another_python_fails(tmp_path: Path) -> None:
    assert _lint_text(tmp_path, BROKEN_TRAINER) == {(1, "base-python")}
    assert _lint_text(tmp_path, BROKEN_TRAINER, spec=">=3.12") == set()


def test_spark_s_entrypoint_copied_into_another_base_must_be_the_entrypoint(tmp_path: Path) -> None:
    text = "FROM apache/spark:4.1.1-python3 AS spark\nFROM python:3.11.14-slim-bookworm\nCOPY --from=spark /opt/entrypoint.sh /opt/\nUSER 185\n"
    assert _lint_text(tmp_path, text) == {(2, "spark-entrypoint")}
    assert _lint_text(tmp_path, text + 'ENTRYPOINT ["python"]\n') == {(5, "spark-entrypoint")}
    assert _lint_text(tmp_path, text + 'ENTRYPOINT ["/opt/entrypoint.sh"]\n') == set()


def test_a_base_missing_from_the_table_is_a_finding_and_every_entry_cites_a_source(tmp_path: Path) -> None:
    assert _lint_text(tmp_path, "FROM debian:12.8-slim\nUSER 10001\n") == {(1, "base-python")}
    for base, (version, source) in dockerfile_lint.BASE_PYTHON.items():
        assert re.fullmatch(r"3\.\d+", version) and "https://" in source, base
    assert dockerfile_lint.requires_python() == ">=3.11,<3.12"


def test_hadolint_passes_the_shipped_dockerfiles_when_it_is_installed() -> None:
    hadolint = shutil.which("hadolint")
    if hadolint is None:
        pytest.skip("hadolint is not installed (not a Debian package); docker/dockerfile_lint.py checks the rules here")
    for name in ("Dockerfile.airflow", "Dockerfile.spark-job", "Dockerfile.trainer"):
        proc = subprocess.run([hadolint, "--failure-threshold", "error", str(DOCKER / name)], capture_output=True, text=True)
        assert proc.returncode == 0, proc.stdout
