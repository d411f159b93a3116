"""What a validation returns or raises: :class:`Failure`, :class:`ValidationOutcome`, :class:`ContractViolation`.

Use ``outcome.passed`` to branch, ``outcome.errors`` / ``outcome.warnings`` to report, and catch
:class:`ContractViolation` where a failing batch must stop a pipeline (its ``outcome`` and
``quarantine_path`` say what failed and where the batch went).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["ContractViolation", "Failure", "ValidationOutcome"]


@dataclass(frozen=True)
class Failure:
    """One failed rule: its id (``value.range``), column (None for table rules), severity,
    up to a few offending values (JSON-friendly), how many rows/windows offended, and a sentence."""

    rule: str
    column: str | None
    severity: str
    sample: tuple[Any, ...]
    unexpected_count: int | None
    detail: str = ""

    def describe(self) -> str:
        """One line for logs and exception messages."""
        where = f" column {self.column!r}" if self.column else ""
        count = f", {self.unexpected_count} offending" if self.unexpected_count is not None else ""
        sample = f", e.g. {list(self.sample)!r}" if self.sample else ""
        detail = f" ({self.detail})" if self.detail else ""
        return f"[{self.severity}] rule {self.rule}{where}{count}{sample}{detail}"


@dataclass
class ValidationOutcome:
    """Result of validating one batch against one contract."""

    dataset: str
    batch_id: str
    rows: int | None
    failures: list[Failure] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    quarantine_path: Path | None = None
    #: The GX Data Docs page of this batch's Checkpoint run (None when validated without a GX project).
    data_docs_page: Path | None = None

    @property
    def errors(self) -> list[Failure]:
        return [f for f in self.failures if f.severity == "error"]

    @property
    def warnings(self) -> list[Failure]:
        return [f for f in self.failures if f.severity == "warning"]

    @property
    def passed(self) -> bool:
        """True when no error-severity rule failed (warnings do not fail a batch)."""
        return not self.errors

    def to_dict(self) -> dict[str, Any]:
        """JSON-serialisable form (used for report.json)."""
        return {
            "dataset": self.dataset,
            "batch_id": self.batch_id,
            "rows": self.rows,
            "passed": self.passed,
            "failures": [_jsonable(asdict(f)) for f in self.failures],
            "skipped": list(self.skipped),
            "quarantine_path": str(self.quarantine_path) if self.quarantine_path else None,
            "data_docs_page": str(self.data_docs_page) if self.data_docs_page else None,
        }


def _jsonable(obj: Any) -> Any:
    """Round-trip through json with str() for anything exotic (timestamps, numpy scalars)."""
    return json.loads(json.dumps(obj, default=str, allow_nan=True))


class ContractViolation(Exception):
    """A batch broke error-severity rules; it has been quarantined at ``quarantine_path``."""

    def __init__(self, outcome: ValidationOutcome) -> None:
        self.outcome = outcome
        self.quarantine_path = outcome.quarantine_path
        lines = "; ".join(f.describe() for f in outcome.errors)
        super().__init__(
            f"dataset {outcome.dataset!r} batch {outcome.batch_id!r} violates its contract: {lines}. "
            f"Batch quarantined at {outcome.quarantine_path}"
        )
