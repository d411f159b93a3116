"""The FlinkDeployment CRD ships inside the package: validation needs no folder beside the repo."""

from __future__ import annotations

import filecmp
import subprocess
import sys
from pathlib import Path

import pytest

from flinktune.kubernetes.crd import default_crd_dir, load_crd_schema

REFERENCE = Path(__file__).resolve().parents[3].parent / "shared" / "crds"


def test_default_crd_is_the_packaged_copy_and_loads(monkeypatch):
    monkeypatch.delenv("FLINKTUNE_CRD_DIR", raising=False)
    folder = default_crd_dir()
    assert folder.parts[-3:] == ("flinktune", "resources", "crds")
    schema = load_crd_schema(folder)
    assert schema.version == "v1beta1" and "spec" in schema.schema["properties"]


@pytest.mark.skipif(not REFERENCE.is_dir(), reason="the shared reference CRD folder is not beside this checkout")
def test_packaged_crd_is_byte_identical_to_the_reference():
    (shipped,) = sorted(default_crd_dir().glob("*.yml"))
    assert filecmp.cmp(shipped, REFERENCE / shipped.name, shallow=False)


def test_the_crd_loads_from_outside_the_repository(tmp_path):
    # As in an image: another working directory, no FLINKTUNE_CRD_DIR, nothing beside the code.
    code = "from flinktune.kubernetes.crd import load_crd_schema; print(load_crd_schema().source)"
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(Path(__file__).resolve().parents[3])}
    out = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "flinktune/resources/crds/flinkdeployments.flink.apache.org-v1" in out.stdout
