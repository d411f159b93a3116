"""A small Dockerfile checker for the rules that matter here (hadolint is not available offline).

Run ``python docker/dockerfile_lint.py docker/Dockerfile.*``; exits 1 and prints
``<file>:<line>: <rule>: <message>`` per finding. Use :func:`lint` from tests. Rules:

- ``pinned-base``: every ``FROM`` names an explicit tag or digest, never ``latest`` or none.
- ``no-add-url``: no ``ADD`` of a URL (use a checked download in ``RUN``).
- ``user-set``: the final stage sets a ``USER`` that is not root.
- ``apt-hygiene``: ``apt-get install`` uses ``--no-install-recommends`` and cleans ``/var/lib/apt/lists``.
- ``pip-no-cache``: ``pip install`` uses ``--no-cache-dir``.
- ``copy-not-add``: ``ADD`` of local files is ``COPY``.
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass
from pathlib import Path

__all__ = ["Finding", "lint", "main"]


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


def lint(path: str | Path) -> list[Finding]:
    """The findings for one Dockerfile (an empty list when it is clean)."""
    path = Path(path)
    found: list[Finding] = []
    instructions = _instructions(path.read_text())
    args = {m.group(1): m.group(2) for _, word, a in instructions if word == "ARG"
            for m in [re.match(r"(\w+)=(\S+)", a)] if m}
    last_user, stage_start = None, 0
    for number, word, rest in instructions:
        def add(rule: str, message: str) -> None:
            found.append(Finding(str(path), number, rule, message))

        if word == "FROM":
            image = re.sub(r"^--platform=\S+\s+", "", rest).split()[0]
            image = re.sub(r"\$\{?(\w+)\}?", lambda m: args.get(m.group(1), m.group(0)), image)
            name_tag = image.split("@")[0].rsplit("/", 1)[-1]
            if "@sha256:" not in image and (":" not in name_tag or name_tag.endswith(":latest")):
                add("pinned-base", f"base image {image!r} must carry an explicit version tag or digest")
            last_user, stage_start = None, number
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
    if last_user in (None, "root", "0"):
        found.append(Finding(str(path), stage_start or 1, "user-set",
                             "the final stage must switch to a non-root USER" if last_user else "the final stage sets no USER"))
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
