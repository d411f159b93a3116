"""The Dockerfiles pass the project's lint rules, and the linter catches each rule it claims."""

from __future__ import annotations

import importlib.util
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
        (1, "pinned-base"), (2, "no-add-url"), (3, "copy-not-add"), (4, "apt-hygiene"), (5, "pip-no-cache"),
        (7, "pinned-base"), (7, "user-set"),
    }
    proc = subprocess.run([sys.executable, str(DOCKER / "dockerfile_lint.py"), str(path)], capture_output=True, text=True)
    assert proc.returncode == 1 and f"{path}:2: no-add-url:" in proc.stdout


def test_linter_accepts_digests_args_and_a_non_root_user(tmp_path: Path) -> None:
    path = tmp_path / "Dockerfile"
    path.write_text("ARG BASE=python:3.11.9-slim\nFROM ${BASE}\nFROM alpine@sha256:" + "a" * 64 + "\nUSER 10001\n")
    assert dockerfile_lint.lint(path) == []
