"""The repository describes the product as it is now: no work log in its text.

Every git-tracked text file is searched for numbered work sessions and issues, the word for a
grab-bag function, and pointers to notes kept outside the repository (the design and the published
systems' facts live in ``docs/DESIGN.md`` and ``docs/baselines.md``). A hit fails with its file and
line. The patterns are assembled from pieces so that this file does not match itself.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

#: What the repository's text must not say, by name: (name, pattern).
FORBIDDEN: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("a numbered session", re.compile(r"\b[Ss]ession" + r"s?(?:[ -]|\s+up\s+to\s+)\d")),
    ("a numbered issue", re.compile(r"\b[Ii]ssue" + r"s?[ -]\d")),
    ("the word for a grab-bag function", re.compile(r"\b[Hh]elp" + r"ers?\b")),
    ("a pointer to notes outside the repository", re.compile(r"\.\./shared/" + r"docs|\bANCHORS" + r"(?:\.md)?\b")),
)

#: Files whose owners rewrite them separately; each still holds hits. Remove an entry once its file is clean.
PENDING: tuple[str, ...] = ()


def tracked_text_files() -> list[Path]:
    """The git-tracked files that read as UTF-8 text (binary files and git-annex pointers left out)."""
    try:
        out = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True, timeout=60).stdout
    except (OSError, subprocess.CalledProcessError) as exc:
        pytest.skip(f"not a git checkout: {exc}")
    files = []
    for name in out.decode().split("\0"):
        path = ROOT / name
        if name and path.is_file() and not path.is_symlink():
            files.append(path)
    return files


def hits(path: Path) -> list[str]:
    """``file:line: what`` for every forbidden phrase in ``path``; none for a binary file."""
    data = path.read_bytes()
    if b"\0" in data:
        return []
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return []
    rel = path.relative_to(ROOT).as_posix()
    found = []
    for lineno, line in enumerate(text.splitlines(), start=1):
        for what, pattern in FORBIDDEN:
            match = pattern.search(line)
            if match:
                found.append(f"{rel}:{lineno}: {what} ({match.group(0)!r})")
    return found


def test_the_patterns_catch_what_they_name() -> None:
    bad = ["see ses" + "sion 12", "Sess" + "ions 13-15", "ses" + "sions up to 16", "the iss" + "ue-18 targets"]
    bad += ["Iss" + "ue 20 targets", "a help" + "er", "../shared/" + "docs/DESIGN.md", "ANCH" + "ORS.md 1.5"]
    for text in bad:
        assert any(p.search(text) for _, p in FORBIDDEN), text
    fine = ["a Spark session", "session.py", "an SQLAlchemy session", "helpful", "../shared/data/demeter-ads"]
    for text in fine:
        assert not any(p.search(text) for _, p in FORBIDDEN), text


def test_no_work_log_in_the_repository_text() -> None:
    found = [h for path in tracked_text_files() if path.relative_to(ROOT).as_posix() not in PENDING for h in hits(path)]
    assert not found, "the repository's text reads as a work log:\n" + "\n".join(found)


def test_pending_files_still_need_their_exclusion() -> None:
    # An entry whose file is clean (or gone) must be removed, so the list only shrinks.
    clean = [name for name in PENDING if not (ROOT / name).is_file() or not hits(ROOT / name)]
    assert not clean, f"remove from PENDING, nothing left to exclude: {clean}"
