"""The five knobs of a Flink job and the discrete space a tuner searches.

Use :class:`Configuration` for one concrete setting (what runs, what a policy proposes) and
:class:`ConfigSpace` for the candidate grid (840 configurations by default, docs/DESIGN.md section 5).
A configuration knows its cost: TaskManagers = ceil(parallelism / slots), and CPU and memory are
per TaskManager. Per-vertex parallelism overrides (DS2-style policies) ride along as a mapping
from vertex name to parallelism; they never change the TaskManager count, which follows the
job-level parallelism (Flink's slot sharing puts one subtask of every vertex in a slot).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from flinktune.limits import MAX_PARALLELISM, LimitError, check_int, check_knobs

__all__ = [
    "KNOBS",
    "ConfigError",
    "ConfigSpace",
    "Configuration",
    "default_space",
    "space_from_runs",
    "spread_design",
]

#: The tunable knobs, in the order used for feature vectors.
KNOBS: tuple[str, ...] = ("parallelism", "task_slots", "cpu", "memory_mb", "checkpoint_interval_s")


class ConfigError(ValueError):
    """A configuration or configuration space is impossible; the message names the field."""


@dataclass(frozen=True, order=True)
class Configuration:
    """One setting of the five knobs (plus optional per-vertex parallelism overrides).

    ``cpu`` is cores per TaskManager, ``memory_mb`` is process memory per TaskManager.
    """

    parallelism: int
    task_slots: int
    cpu: float
    memory_mb: int
    checkpoint_interval_s: int
    vertex_parallelism: tuple[tuple[str, int], ...] = field(default=(), compare=True)

    def __post_init__(self) -> None:
        checks = {
            "parallelism": self.parallelism >= 1,
            "task_slots": self.task_slots >= 1,
            "cpu": self.cpu > 0,
            "memory_mb": self.memory_mb >= 256,
            "checkpoint_interval_s": self.checkpoint_interval_s >= 1,
        }
        for name, ok in checks.items():
            if not ok:
                raise ConfigError(f"configuration field {name!r} has impossible value {getattr(self, name)!r}")
        for vertex, p in self.vertex_parallelism:
            if p < 1:
                raise ConfigError(f"vertex parallelism for {vertex!r} must be >= 1, got {p}")

    @property
    def taskmanagers(self) -> int:
        """TaskManagers needed to host ``parallelism`` slots."""
        return math.ceil(self.parallelism / self.task_slots)

    @property
    def total_cpu(self) -> float:
        """Cores reserved by the job's TaskManagers."""
        return self.taskmanagers * self.cpu

    @property
    def total_memory_mb(self) -> int:
        """Memory reserved by the job's TaskManagers, MB."""
        return self.taskmanagers * self.memory_mb

    def vertex_overrides(self) -> dict[str, int]:
        """Per-vertex parallelism overrides as a dict (empty when none)."""
        return dict(self.vertex_parallelism)

    def with_(self, **changes: Any) -> Configuration:
        """A copy with some knobs changed (``vertex_parallelism`` may be a dict)."""
        vp = changes.get("vertex_parallelism")
        if isinstance(vp, Mapping):
            changes["vertex_parallelism"] = tuple(sorted(vp.items()))
        return replace(self, **changes)

    def knob_vector(self) -> tuple[float, ...]:
        """The five knobs as floats, in :data:`KNOBS` order."""
        return tuple(float(getattr(self, k)) for k in KNOBS)

    def to_dict(self) -> dict[str, Any]:
        """JSON-friendly form; inverse of :meth:`from_dict`."""
        d: dict[str, Any] = {k: getattr(self, k) for k in KNOBS}
        if self.vertex_parallelism:
            d["vertex_parallelism"] = dict(self.vertex_parallelism)
        return d

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], *, where: str = "configuration") -> Configuration:
        """Build from a mapping; unknown or missing keys raise :class:`ConfigError` naming ``where``."""
        allowed = set(KNOBS) | {"vertex_parallelism"}
        unknown = sorted(set(data) - allowed)
        if unknown:
            raise ConfigError(f"{where}: unknown key(s) {unknown}; allowed: {sorted(allowed)}")
        missing = [k for k in KNOBS if k not in data]
        if missing:
            raise ConfigError(f"{where}: missing key(s) {missing}")
        try:
            # Physical limits first: 2.7 slots is refused, not truncated to 2.
            knobs = check_knobs(data, where)
            vertices = dict(data.get("vertex_parallelism") or {})
            return cls(
                parallelism=int(knobs["parallelism"]),
                task_slots=int(knobs["task_slots"]),
                cpu=float(knobs["cpu"]),
                memory_mb=int(knobs["memory_mb"]),
                checkpoint_interval_s=int(knobs["checkpoint_interval_s"]),
                vertex_parallelism=tuple(
                    sorted(
                        (str(k), check_int(v, f"{where}: vertex_parallelism[{k!r}]", 1, MAX_PARALLELISM))
                        for k, v in vertices.items()
                    )
                ),
            )
        except LimitError as exc:
            raise ConfigError(str(exc)) from None
        except (TypeError, ValueError) as exc:
            if isinstance(exc, ConfigError):
                raise ConfigError(f"{where}: {exc}") from None
            raise ConfigError(f"{where}: {exc}") from None

    def describe(self) -> str:
        """Short human form, e.g. ``p16 x2 slots, 8 TM x (2 cpu, 2048 MB), ckpt 30 s``."""
        base = (
            f"p{self.parallelism} x{self.task_slots} slots, {self.taskmanagers} TM x "
            f"({self.cpu:g} cpu, {self.memory_mb} MB), ckpt {self.checkpoint_interval_s} s"
        )
        if self.vertex_parallelism:
            base += " [" + ", ".join(f"{v}={p}" for v, p in self.vertex_parallelism) + "]"
        return base


@dataclass(frozen=True)
class ConfigSpace:
    """The discrete grid of candidate configurations.

    The candidate set is the full grid filtered to parallelism divisible by slots and to a footprint
    no larger than the maximum configuration's (largest parallelism, one slot each, the largest
    per-slot CPU share and memory of the smallest grid TaskManager): the 840 configurations of
    Demeter's experiments with the defaults.
    """

    parallelism: tuple[int, ...] = (8, 12, 16, 20, 24)
    task_slots: tuple[int, ...] = (1, 2, 3, 4)
    cpu: tuple[float, ...] = (1.0, 2.0, 3.0)
    memory_mb: tuple[int, ...] = (1024, 2048, 3072, 4096)
    checkpoint_interval_s: tuple[int, ...] = (10, 30, 50, 70, 90)
    max_total_cpu: float | None = None
    max_total_memory_mb: int | None = None

    def __post_init__(self) -> None:
        for name in KNOBS:
            values = getattr(self, name)
            if not values:
                raise ConfigError(f"config space: {name!r} has no values")
            if list(values) != sorted(set(values)):
                raise ConfigError(f"config space: {name!r} values must be strictly increasing, got {list(values)}")
            if min(values) <= 0:
                raise ConfigError(f"config space: {name!r} values must be positive, got {list(values)}")

    @property
    def maximum(self) -> Configuration:
        """The static-max configuration: most parallelism, one slot per TM, 1 core and most memory per TM.

        This is the reference every report is relative to (Demeter's 24 x (1 CPU, 4 GiB)).
        """
        return Configuration(
            parallelism=self.parallelism[-1],
            task_slots=self.task_slots[0],
            cpu=self.cpu[0],
            memory_mb=self.memory_mb[-1],
            checkpoint_interval_s=self.checkpoint_interval_s[0],
        )

    def budget(self) -> tuple[float, int]:
        """(max total CPU, max total memory MB) a candidate may reserve."""
        mx = self.maximum
        return (
            self.max_total_cpu if self.max_total_cpu is not None else mx.total_cpu,
            self.max_total_memory_mb if self.max_total_memory_mb is not None else mx.total_memory_mb,
        )

    def candidates(self) -> list[Configuration]:
        """Every admissible configuration, in a stable order (cheapest footprint first)."""
        cpu_cap, mem_cap = self.budget()
        out: list[Configuration] = []
        for p, s, c, m, ck in itertools.product(
            self.parallelism, self.task_slots, self.cpu, self.memory_mb, self.checkpoint_interval_s
        ):
            if p % s:
                continue
            cfg = Configuration(p, s, c, m, ck)
            if cfg.total_cpu <= cpu_cap + 1e-9 and cfg.total_memory_mb <= mem_cap:
                out.append(cfg)
        out.sort(key=lambda c: (c.total_cpu, c.total_memory_mb, c.knob_vector()))
        return out

    def __iter__(self) -> Iterator[Configuration]:
        return iter(self.candidates())

    def contains(self, cfg: Configuration) -> bool:
        """True when every knob is a grid value and the footprint fits the budget."""
        cpu_cap, mem_cap = self.budget()
        return (
            cfg.parallelism in self.parallelism
            and cfg.task_slots in self.task_slots
            and cfg.cpu in self.cpu
            and cfg.memory_mb in self.memory_mb
            and cfg.checkpoint_interval_s in self.checkpoint_interval_s
            and cfg.parallelism % cfg.task_slots == 0
            and cfg.total_cpu <= cpu_cap + 1e-9
            and cfg.total_memory_mb <= mem_cap
        )

    def bounds(self) -> list[tuple[float, float]]:
        """(low, high) per knob in :data:`KNOBS` order, for normalising feature vectors."""
        return [(float(min(getattr(self, k))), float(max(getattr(self, k)))) for k in KNOBS]

    def normalise(self, cfg: Configuration) -> list[float]:
        """Knob vector scaled to [0, 1] per knob."""
        out = []
        for (lo, hi), v in zip(self.bounds(), cfg.knob_vector()):
            out.append(0.0 if hi == lo else (v - lo) / (hi - lo))
        return out

    @classmethod
    def from_yaml(cls, path: str | Path) -> ConfigSpace:
        """Load a space from YAML (keys: the knobs as lists, optional max_total_cpu / max_total_memory_mb)."""
        path = Path(path)
        try:
            data = yaml.safe_load(path.read_text()) or {}
        except (OSError, yaml.YAMLError) as exc:
            raise ConfigError(f"{path}: cannot read config space: {exc}") from None
        if not isinstance(data, dict):
            raise ConfigError(f"{path}: expected a mapping at the top level, got {type(data).__name__}")
        allowed = set(KNOBS) | {"max_total_cpu", "max_total_memory_mb"}
        unknown = sorted(set(data) - allowed)
        if unknown:
            raise ConfigError(f"{path}: unknown key(s) {unknown}; allowed: {sorted(allowed)}")
        kwargs: dict[str, Any] = {}
        for k in KNOBS:
            if k in data:
                v = data[k]
                if not isinstance(v, list):
                    raise ConfigError(f"{path}: key {k!r} must be a list of values, got {v!r}")
                kwargs[k] = tuple(float(x) if k == "cpu" else int(x) for x in v)
        for k in ("max_total_cpu", "max_total_memory_mb"):
            if k in data:
                kwargs[k] = data[k]
        try:
            return cls(**kwargs)
        except ConfigError as exc:
            raise ConfigError(f"{path}: {exc}") from None


def default_space() -> ConfigSpace:
    """docs/DESIGN.md section 5's space: 840 candidates, max 24 x (1 CPU, 4 GiB)."""
    return ConfigSpace()


def spread_design(
    space: ConfigSpace,
    candidates: Sequence[Configuration],
    n: int,
    seed: int,
    first: Callable[[list[Configuration]], int],
) -> list[Configuration]:
    """``n`` of ``candidates`` spread over the space: greedy max-min distance on normalised knobs.

    Use it for profiling designs. ``first(cands)`` picks the index of the opening configuration in
    the seeded shuffle of ``candidates`` (the shuffle breaks distance ties reproducibly); each next
    one is the farthest from all chosen so far. Returns ``min(n, len(candidates))`` configurations.
    """
    cands = [candidates[i] for i in np.random.default_rng(seed).permutation(len(candidates))]
    X = np.array([space.normalise(c) for c in cands])
    chosen = [first(cands)]
    dist = np.linalg.norm(X - X[chosen[0]], axis=1)
    while len(chosen) < min(n, len(cands)):
        nxt = int(np.argmax(dist))
        chosen.append(nxt)
        dist = np.minimum(dist, np.linalg.norm(X - X[nxt], axis=1))
    return [cands[i] for i in chosen]


def space_from_runs(runs: Any) -> ConfigSpace:
    """The configuration space spanned by the knob values of a table of runs (a DataFrame with the
    :data:`KNOBS` columns, e.g. Demeter's ``profiling_runs.csv``); its :attr:`ConfigSpace.maximum`
    is the static configuration of a folder in that format."""

    def ints(k: str) -> tuple[int, ...]:
        return tuple(sorted({int(float(v)) for v in runs[k]}))

    return ConfigSpace(
        parallelism=ints("parallelism"),
        task_slots=ints("task_slots"),
        cpu=tuple(sorted({float(v) for v in runs["cpu"]})),
        memory_mb=ints("memory_mb"),
        checkpoint_interval_s=ints("checkpoint_interval_s"),
    )
