"""A decide run on a real cluster refuses, in one line and before it touches any store, what it cannot
do there: several ticks, models from a file, and a policy whose memory lives only in its process."""

from __future__ import annotations

import contextlib
import io

import pytest

from flinktune.policies import POLICY_NAMES
from flinktune.runs.decide import IN_PROCESS_MEMORY, decide
from jobs.decide import main


@pytest.mark.parametrize("policy", sorted(IN_PROCESS_MEMORY))
def test_a_policy_with_process_memory_is_refused_on_a_real_cluster(policy, settings, monkeypatch) -> None:
    monkeypatch.setenv("FLINKTUNE_CLUSTER", "kubernetes")
    with pytest.raises(ValueError, match=rf"policy {policy}: it remembers earlier decisions only in the process") as caught:
        decide(job="demo", policy=policy, settings=settings)
    message = str(caught.value)
    assert "\n" not in message and "FLINKTUNE_CLUSTER=kubernetes" in message
    offered = message.rsplit("(", 1)[1].rstrip(")").split(", ")
    assert offered and not set(offered) & IN_PROCESS_MEMORY and set(offered) <= set(POLICY_NAMES)
    assert not settings.var_dir.exists()  # refused before the state store or the model store were opened


def test_the_entry_point_says_it_in_one_line(settings, monkeypatch, tmp_path) -> None:
    monkeypatch.setenv("FLINKTUNE_CLUSTER", "local-flink")
    monkeypatch.setenv("FLINKTUNE_VAR_DIR", str(tmp_path / "var"))
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        code = main(["--job", "demo", "--policy", "reactive"])
    assert code == 2
    lines = err.getvalue().strip().splitlines()
    assert len(lines) == 1 and "policy reactive" in lines[0] and "FLINKTUNE_CLUSTER=local-flink" in lines[0]
