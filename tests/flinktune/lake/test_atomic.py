"""The one atomic writer: a reader sees the old file or folder or the whole new one, never half."""

from pathlib import Path

import pytest

from flinktune.lake.atomic import atomic_dir, atomic_write, atomic_write_with


def _leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.startswith("."))


def test_a_folder_replaces_the_old_one_whole(tmp_path):
    target = tmp_path / "model"
    with atomic_dir(target) as tmp:
        (tmp / "a.json").write_text("1")
    with atomic_dir(target) as tmp:
        assert not (target / "b.json").exists()  # the new folder is invisible until the block ends
        (tmp / "b.json").write_text("2")
    assert sorted(p.name for p in target.iterdir()) == ["b.json"] and _leftovers(tmp_path) == []


def test_a_failed_folder_leaves_the_old_one_and_no_temporary(tmp_path):
    target = tmp_path / "model"
    with atomic_dir(target) as tmp:
        (tmp / "a.json").write_text("1")
    with pytest.raises(RuntimeError, match="fit failed"), atomic_dir(target) as tmp:
        (tmp / "half.json").write_text("x")
        raise RuntimeError("fit failed")
    assert (target / "a.json").read_text() == "1" and not (target / "half.json").exists()
    assert _leftovers(tmp_path) == []


def test_a_failed_file_write_leaves_the_old_file(tmp_path):
    target = atomic_write(tmp_path / "state.pt", b"old")

    def crash(tmp: Path) -> None:
        tmp.write_bytes(b"ha")
        raise OSError("disk full")

    with pytest.raises(OSError, match="disk full"):
        atomic_write_with(target, crash)
    assert target.read_bytes() == b"old" and _leftovers(tmp_path) == []
