"""A streaming job as the twin sees it: a linear chain of job vertices (tasks) with their costs.

Use :func:`builtin_dataflow` for the shipped jobs ("ysb": Yahoo Streaming Benchmark, "tsw": Flink's
TopSpeedWindowing example) and :func:`load_dataflow` for a job described in YAML. A vertex is what
Flink schedules as one task: the operators chained into it run in one thread per subtask, so a
vertex's subtask can use at most one core. Costs are CPU microseconds per record *entering* the
vertex on one full core; ``selectivity`` is records out per record in. State feeds checkpoints,
restores and memory pressure.

YAML shape (``flinktune/resources/dataflow_ysb.yaml`` is a full example)::

    name: ysb
    description: ...
    vertices:
      - {name: source, operators: [kafka_source, filter], cost_us: 80, selectivity: 0.33}
      - {name: window, partitioning: hash, cost_us: 60, state_mb: 2, state_mb_per_krps: 0.2}
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path
from typing import Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

__all__ = ["BUILTIN_DATAFLOWS", "DataflowError", "DataflowSpec", "VertexSpec", "builtin_dataflow", "load_dataflow"]

#: Shipped jobs and the resource file describing each.
BUILTIN_DATAFLOWS: dict[str, str] = {"ysb": "dataflow_ysb.yaml", "tsw": "dataflow_tsw.yaml"}


class DataflowError(ValueError):
    """A job description is invalid; the message names the file and the key."""


class VertexSpec(BaseModel):
    """One job vertex (a chain of operators run by one thread per subtask)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(..., min_length=1, pattern=r"^[A-Za-z0-9_.-]+$", description="Vertex name as metrics and overrides use it.")
    operators: tuple[str, ...] = Field((), description="Operators chained into this vertex (documentation).")
    partitioning: Literal["forward", "rebalance", "hash"] = Field(
        "forward", description="How records reach this vertex: forward (chained/1:1), rebalance (round robin) or hash (keyBy)."
    )
    cost_us: float = Field(..., gt=0, description="CPU microseconds per input record on one full core.")
    selectivity: float = Field(1.0, ge=0, description="Records emitted per record received.")
    state_mb: float = Field(0.0, ge=0, description="Keyed/operator state independent of the rate, MB (whole vertex).")
    state_mb_per_krps: float = Field(
        0.0, ge=0, description="State growing with the input rate (window contents), MB per 1000 rec/s of job input."
    )
    latency_ms: float = Field(0.0, ge=0, description="Latency this vertex adds by design (window firing, batching), ms.")


class DataflowSpec(BaseModel):
    """A job: vertices in topological order (source first, sink last)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(..., min_length=1, description="Job kind name (ysb, tsw, ...).")
    description: str = Field("", description="What the job computes.")
    vertices: tuple[VertexSpec, ...] = Field(..., min_length=1, description="Vertices in topological order; a linear chain.")

    @model_validator(mode="after")
    def _unique_names(self) -> DataflowSpec:
        names = [v.name for v in self.vertices]
        dup = sorted({n for n in names if names.count(n) > 1})
        if dup:
            raise ValueError(f"duplicate vertex name(s) {dup}")
        return self

    @property
    def vertex_names(self) -> tuple[str, ...]:
        return tuple(v.name for v in self.vertices)

    def input_share(self) -> list[float]:
        """Records entering each vertex per record read by the source (products of upstream selectivities)."""
        out, share = [], 1.0
        for v in self.vertices:
            out.append(share)
            share *= v.selectivity
        return out

    def state_mb_at(self, rate: float) -> float:
        """Total state (checkpoint size), MB, at a job input rate (rec/s)."""
        return sum(v.state_mb + v.state_mb_per_krps * rate / 1000.0 for v in self.vertices)


def _from_mapping(data: object, where: str) -> DataflowSpec:
    if not isinstance(data, dict):
        raise DataflowError(f"{where}: expected a mapping at the top level, got {type(data).__name__}")
    try:
        return DataflowSpec.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        loc = ".".join(str(p) for p in first["loc"])
        raise DataflowError(f"{where}: key {loc!r}: {first['msg']}") from None


def load_dataflow(path: str | Path) -> DataflowSpec:
    """Read a job description from YAML; errors name the file and the offending key."""
    path = Path(path)
    try:
        data = yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError) as exc:
        raise DataflowError(f"{path}: cannot read job description: {exc}") from None
    return _from_mapping(data, str(path))


def builtin_dataflow(name: str) -> DataflowSpec:
    """One of the shipped jobs (:data:`BUILTIN_DATAFLOWS`)."""
    if name not in BUILTIN_DATAFLOWS:
        raise DataflowError(f"unknown built-in job {name!r}; known: {sorted(BUILTIN_DATAFLOWS)}")
    res = resources.files("flinktune") / "resources" / BUILTIN_DATAFLOWS[name]
    return _from_mapping(yaml.safe_load(res.read_text()), f"flinktune/resources/{BUILTIN_DATAFLOWS[name]}")
