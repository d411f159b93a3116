"""Replay the same load under several policies and seeds in one pool, and keep each run's figures on disk.

Use :func:`replay_runs` with (seed, policy) jobs, each with its own start state: the slowest
first, every seed's runs side by side. With a :class:`RunCache` a run already replayed from the
same twin, period, settings and code is read back instead of replayed: a report written again on
the same state (the demo's report, then ``flinktune report``) replays nothing. The cache holds
JSON (figures, per-minute series, change times), never pickles.
"""

from __future__ import annotations

import hashlib
import json
import logging
import multiprocessing
import os
from collections.abc import Mapping
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from flinktune.config_space import ConfigSpace
from flinktune.replay.harness import ReplaySettings, replay_policy
from flinktune.twin.profile import ClusterProfile

__all__ = ["ReplayJob", "ReplayedRun", "RunCache", "code_digest", "replay_runs"]

log = logging.getLogger(__name__)

_SOURCES = (Path(__file__).resolve().parents[1], Path(__file__).resolve().parents[2] / "models")


@dataclass(frozen=True)
class ReplayJob:
    """One replay: the policy, its settings and the twin state it starts from."""

    policy: str
    settings: ReplaySettings
    start_state: dict[str, Any]


@dataclass(frozen=True)
class ReplayedRun:
    """What a report keeps of a replay: its summary, its minutes and when it changed the configuration (s)."""

    summary: dict[str, float]
    minutes: pd.DataFrame
    changes: tuple[int, ...]

    def to_json(self) -> dict[str, Any]:
        m = self.minutes
        return {
            "summary": self.summary,
            "minutes": {"ts": (m.index.as_unit("ns").asi8 // 10**9).tolist(), **{c: m[c].tolist() for c in m.columns}},
            "changes": list(self.changes),
        }

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> ReplayedRun:
        cols = dict(d["minutes"])
        index = pd.to_datetime(np.asarray(cols.pop("ts"), dtype=np.int64), unit="s", utc=True).rename("ts")
        minutes = pd.DataFrame({c: np.asarray(v, dtype=float) for c, v in cols.items()}, index=index)
        return cls({k: float(v) for k, v in d["summary"].items()}, minutes, tuple(int(t) for t in d["changes"]))


def code_digest() -> str:
    """A digest of flinktune's and the models' source: a replay cached by other code is not reused."""
    h = hashlib.sha256()
    for root in _SOURCES:
        for path in sorted(root.rglob("*.py")):
            h.update(str(path.relative_to(root)).encode())
            h.update(path.read_bytes())
    return h.hexdigest()


class RunCache:
    """Replayed runs under ``folder``, one JSON file per (key, seed, policy); ``key``: what the runs depend on."""

    def __init__(self, folder: Path, key: Mapping[str, Any]) -> None:
        self.folder = Path(folder)
        text = json.dumps({**key, "code": code_digest()}, sort_keys=True, default=str)
        self.digest = hashlib.sha256(text.encode()).hexdigest()[:20]

    def path(self, seed: int, job: ReplayJob) -> Path:
        settings = hashlib.sha256(repr(job.settings).encode()).hexdigest()[:8]
        return self.folder / f"{self.digest}-{settings}-{seed}-{job.policy}.json"

    def get(self, seed: int, job: ReplayJob) -> ReplayedRun | None:
        path = self.path(seed, job)
        try:
            return ReplayedRun.from_json(json.loads(path.read_text()))
        except FileNotFoundError:
            return None
        except (OSError, ValueError, KeyError, TypeError) as exc:  # a damaged file is replayed again, and replaced
            log.warning("%s: unreadable cached replay, replaying it again (%s)", path, exc)
            return None

    def put(self, seed: int, job: ReplayJob, run: ReplayedRun) -> None:
        path = self.path(seed, job)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{os.getpid()}")
        tmp.write_text(json.dumps(run.to_json()))
        os.replace(tmp, path)  # a reader sees the whole file or none


def _replay(job: ReplayJob, trace: pd.Series, profile: ClusterProfile, space: ConfigSpace) -> ReplayedRun:
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    run = replay_policy(job.policy, trace, profile, space, job.settings, start_state=job.start_state)
    return ReplayedRun(run.summary, run.minutes, tuple(int(d["ts"]) for d in run.decisions if d["changed"]))


def replay_runs(
    trace: pd.Series,
    jobs: Mapping[tuple[int, str], ReplayJob],
    *,
    profile: ClusterProfile,
    space: ConfigSpace,
    workers: int = 2,
    cache: RunCache | None = None,
) -> dict[tuple[int, str], ReplayedRun]:
    """Every (seed, policy) job replayed (or read from ``cache``), ordered as ``jobs``.

    ``workers`` > 1 replays in that many spawned processes (seeded: the same figures as in this process)."""
    done: dict[tuple[int, str], ReplayedRun] = {}
    for key, job in jobs.items():
        hit = cache.get(key[0], job) if cache is not None else None
        if hit is not None:
            done[key] = hit
    todo = sorted((k for k in jobs if k not in done), key=lambda k: {"demeter": 0, "flinktune": 1}.get(jobs[k].policy, 2))

    def keep(key: tuple[int, str], run: ReplayedRun) -> None:  # as each ends: an interrupted report keeps what it replayed
        if cache is not None:
            cache.put(key[0], jobs[key], run)
        done[key] = run

    if len(todo) <= 1 or workers <= 1:
        for key in todo:
            keep(key, _replay(jobs[key], trace, profile, space))
    else:
        # Spawned, not forked: the caller may hold threads (Spark's gateway, Airflow's API in the local
        # runner's child), and a forked child can hang on a lock one of them held.
        with ProcessPoolExecutor(max_workers=min(workers, len(todo)), mp_context=multiprocessing.get_context("spawn")) as pool:
            futures = {pool.submit(_replay, jobs[k], trace, profile, space): k for k in todo}
            for fut in as_completed(futures):
                keep(futures[fut], fut.result())
    return {k: done[k] for k in jobs}
