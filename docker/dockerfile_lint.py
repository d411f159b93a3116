"""A small Dockerfile checker for the rules that matter here (hadolint is not a Debian package).

Run ``python docker/dockerfile_lint.py docker/Dockerfile.*``; exits 1 and prints
``<file>:<line>: <rule>: <message>`` per finding. Use :func:`lint` from tests. Rules:

- ``pinned-base``: every ``FROM`` names an explicit tag or digest, never ``latest`` or none.
- ``no-add-url``: no ``ADD`` of a URL (use a checked download in ``RUN``).
- ``user-set``: the final stage sets a ``USER`` that is not root.
- ``apt-hygiene``: ``apt-get install`` uses ``--no-install-recommends`` and cleans ``/var/lib/apt/lists``.
- ``pip-no-cache``: ``pip install`` uses ``--no-cache-dir``.
- ``copy-not-add``: ``ADD`` of local files is ``COPY``.
- ``base-python``: the final stage's base runs a Python that the project's ``requires-python``
  (``pyproject.toml``) allows, by :data:`BASE_PYTHON`, a table of pinned bases with the Python each
  runs ``pip install`` with and the source that says so; a base not in the table is a finding too.
- ``spark-entrypoint``: an image built on a Spark image (its base is one, or it copies Spark's
  ``/opt/entrypoint.sh`` from one) keeps that entrypoint: Spark on Kubernetes starts driver and
  executor pods through it, and the application is the SparkApplication's main file, not the ENTRYPOINT.
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass
from pathlib import Path

__all__ = ["BASE_PYTHON", "Finding", "lint", "main", "requires_python"]

#: The Python (major.minor) each pinned base runs ``pip install`` with, and where that is stated.
#: A base without a Python counts the ``python3`` its distribution installs.
BASE_PYTHON: dict[str, tuple[str, str]] = {
    "python:3.11.14-slim-bookworm": ("3.11", "https://hub.docker.com/_/python: the tag names the Python release"),
    "apache/airflow:3.3.2-python3.11": (
        "3.11",
        "https://airflow.apache.org/docs/docker-stack/index.html: the -pythonX.Y suffix names the image's Python",
    ),
    "apache/spark:4.1.1-python3": (
        "3.10",
        "https://github.com/apache/spark-docker (e.g. 4.0.0/scala2.13-java17-ubuntu/Dockerfile): built on "
        "eclipse-temurin:<java>-jammy, and the python3 images add Ubuntu 22.04's python3, 3.10 "
        "(https://packages.ubuntu.com/jammy/python3)",
    ),
    "nvidia/cuda:12.6.3-cudnn-runtime-ubuntu24.04": (
        "3.12",
        "no Python in the image; Ubuntu 24.04 installs python3 3.12 and has no python3.11 package "
        "(https://packages.ubuntu.com/noble/python3)",
    ),
    "nvidia/cuda:12.6.3-cudnn-runtime-ubuntu22.04": (
        "3.10",
        "no Python in the image; Ubuntu 22.04 installs python3 3.10 (https://packages.ubuntu.com/jammy/python3)",
    ),
}
_SPARK_IMAGES = ("apache/spark:", "spark:")
_SPARK_ENTRYPOINT = "/opt/entrypoint.sh"
_PYPROJECT = Path(__file__).resolve().parents[1] / "pyproject.toml"


def requires_python(pyproject: Path = _PYPROJECT) -> str:
    """The project's ``requires-python`` specifier (``>=3.11,<3.12``)."""
    import tomllib

    return str(tomllib.loads(pyproject.read_text())["project"]["requires-python"])


def _python_allowed(version: str, spec: str) -> bool:
    from packaging.specifiers import SpecifierSet

    return SpecifierSet(spec).contains(f"{version}.0")


def _is_spark(image: str) -> bool:
    return image.startswith(_SPARK_IMAGES)


def _entrypoint(args: str) -> str:
    """The program an ENTRYPOINT runs (exec or shell form)."""
    import json

    try:
        form = json.loads(args)
    except ValueError:
        return args.split()[0] if args.split() else ""
    return str(form[0]) if isinstance(form, list) and form else ""


@dataclass(frozen=True)
class Finding:
    path: str
    line: int
    rule: str
    message: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.rule}: {self.message}"


def _instructions(text: str) -> list[tuple[int, str, str]]:
    """``(first line number, INSTRUCTION, arguments)`` with continuation lines joined and comments dropped."""
    out, buf, start = [], "", 0
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not buf and (not line or line.startswith("#")):
            continue
        if not buf:
            start = number
        if line.startswith("#"):
            continue  # a comment inside a continued instruction
        buf += (" " if buf else "") + line.rstrip("\\").strip()
        if not line.endswith("\\"):
            word, _, args = buf.partition(" ")
            out.append((start, word.upper(), args.strip()))
            buf = ""
    return out


def lint(path: str | Path, *, python_spec: str | None = None) -> list[Finding]:
    """The findings for one Dockerfile (an empty list when it is clean); ``python_spec`` defaults to the project's ``requires-python``."""
    path = Path(path)
    found: list[Finding] = []
    instructions = _instructions(path.read_text())
    args = {m.group(1): m.group(2) for _, word, a in instructions if word == "ARG" for m in [re.match(r"(\w+)=(\S+)", a)] if m}
    last_user, stage_start = None, 0
    stages: dict[str, str] = {}  # stage name -> its base image
    base, spark_copied, entry = "", False, None  # of the stage being read (the final one at the end)
    for number, word, rest in instructions:

        def add(rule: str, message: str, number: int = number) -> None:
            found.append(Finding(str(path), number, rule, message))

        if word == "FROM":
            image = re.sub(r"^--platform=\S+\s+", "", rest).split()[0]
            image = re.sub(r"\$\{?(\w+)\}?", lambda m: args.get(m.group(1), m.group(0)), image)
            name_tag = image.split("@")[0].rsplit("/", 1)[-1]
            if "@sha256:" not in image and (":" not in name_tag or name_tag.endswith(":latest")):
                add("pinned-base", f"base image {image!r} must carry an explicit version tag or digest")
            last_user, stage_start = None, number
            named = re.search(r"\s+AS\s+(\S+)\s*$", rest, re.I)
            base = stages.get(image, image)  # FROM an earlier stage builds on that stage's base
            if named:
                stages[named.group(1)] = base
            spark_copied, entry = False, None
        elif word == "COPY":
            source = re.search(r"--from=(\S+)", rest)
            if source and _is_spark(stages.get(source.group(1), source.group(1))) and _SPARK_ENTRYPOINT in rest:
                spark_copied = True
        elif word == "ENTRYPOINT":
            entry = (number, _entrypoint(rest))
        elif word == "ADD":
            if re.search(r"(^|\s)(https?|ftp)://", rest):
                add("no-add-url", "ADD of a URL: download in RUN with a checksum instead")
            else:
                add("copy-not-add", "use COPY for local files (ADD also unpacks archives implicitly)")
        elif word == "USER":
            last_user = rest.split(":")[0]
        elif word == "RUN":
            if "apt-get install" in rest:
                if "--no-install-recommends" not in rest:
                    add("apt-hygiene", "apt-get install without --no-install-recommends")
                if "rm -rf /var/lib/apt/lists" not in rest:
                    add("apt-hygiene", "apt-get install without removing /var/lib/apt/lists in the same RUN")
            for command in re.split(r"&&|;", rest):
                if re.search(r"\bpip3?\s+install\b", command) and "--no-cache-dir" not in command:
                    add("pip-no-cache", "pip install without --no-cache-dir")
    if not instructions or instructions[0][1] not in ("FROM", "ARG"):
        found.append(Finding(str(path), 1, "pinned-base", "a Dockerfile must start with FROM (or ARG for it)"))
    if base:
        found += _final_stage(str(path), stage_start, base, spark_copied, entry, python_spec)
    if last_user in (None, "root", "0"):
        found.append(
            Finding(
                str(path),
                stage_start or 1,
                "user-set",
                "the final stage must switch to a non-root USER" if last_user else "the final stage sets no USER",
            )
        )
    return found


def _final_stage(
    path: str, line: int, base: str, spark_copied: bool, entry: tuple[int, str] | None, python_spec: str | None
) -> list[Finding]:
    """``base-python`` and ``spark-entrypoint`` for the stage the image runs."""
    found = []
    spec = python_spec or requires_python()
    if base not in BASE_PYTHON:
        found.append(
            Finding(
                path, line, "base-python", f"base {base!r} is not in BASE_PYTHON: add it with the Python it runs and a source"
            )
        )
    elif not _python_allowed(BASE_PYTHON[base][0], spec):
        version, source = BASE_PYTHON[base]
        found.append(
            Finding(
                path, line, "base-python", f"base {base!r} runs Python {version}, outside requires-python {spec!r} ({source})"
            )
        )
    if _is_spark(base) or spark_copied:
        if entry is None and not _is_spark(base):
            found.append(
                Finding(path, line, "spark-entrypoint", f"copies Spark's {_SPARK_ENTRYPOINT} but sets no ENTRYPOINT to it")
            )
        elif entry is not None and entry[1] != _SPARK_ENTRYPOINT:
            found.append(
                Finding(
                    path,
                    entry[0],
                    "spark-entrypoint",
                    f"ENTRYPOINT {entry[1]!r} replaces Spark's {_SPARK_ENTRYPOINT}, which starts the driver "
                    "and executor pods; run the application as the SparkApplication's main file",
                )
            )
    return found


def main(argv: list[str] | None = None) -> int:
    paths = sys.argv[1:] if argv is None else argv
    if not paths:
        print("usage: python docker/dockerfile_lint.py Dockerfile [...]", file=sys.stderr)
        return 2
    findings = [f for p in paths for f in lint(p)]
    for f in findings:
        print(f)
    return 1 if findings else 0


if __name__ == "__main__":
    sys.exit(main())
