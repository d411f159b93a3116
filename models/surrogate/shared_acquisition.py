"""One profiling acquisition for every job of a decision cycle that asks the same question.

Use :func:`sharing_acquisitions` around a fleet's decision cycle (many jobs decided one after
another in one process, jobs of one kind sharing one surrogate object). Inside the block,
:func:`~models.surrogate.acquisition.suggest_profiling` calls that would compute the same thing
run the qLogNEHVI acquisition once and share its picks: the same surrogate *object*, equal
candidates, budget, limits, batch size, seed and baseline, and planned rates in the same cell of
a relative grid. Cell ``k`` holds the rates in ``[g**k, g**(k+1))`` with ``g = 1 + rate_step``
(2.5 % by default); the acquisition runs at the cell's geometric centre, so the picks do not
depend on which job of the cell came first. Outside the block nothing is shared.

Why a rate grid: a first fleet cycle asks for profiling at hundreds of planned rates, each about
a second of acquisition (70 % of the cycle, measured), while the surrogate's marginals at rates
2.5 % apart barely differ; the picks' agreement with exact-rate acquisitions is measured in
``docs/results/fleet.md``. The profiling runs themselves still run at each job's own rate.

The block must not see a surrogate refitted *in place* (the picks would be stale): a new fit is a
new object (``GPSurrogate`` refits make one) or happens outside the cycle (the profiling DAG).
"""

from __future__ import annotations

import contextlib
import hashlib
import math
from collections.abc import Callable, Iterator
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

import numpy as np

__all__ = ["AcquisitionShare", "active_share", "sharing_acquisitions"]

_ACTIVE: ContextVar[AcquisitionShare | None] = ContextVar("flinktune_acquisition_share", default=None)


def _digest(*parts: Any) -> str:
    """A stable digest of arrays and scalars (arrays by dtype, shape and bytes)."""
    h = hashlib.blake2b(digest_size=16)
    for p in parts:
        if isinstance(p, np.ndarray):
            a = np.ascontiguousarray(p)
            h.update(f"{a.dtype}{a.shape}".encode())
            h.update(a.tobytes())
        else:
            h.update(repr(p).encode())
        h.update(b"|")
    return h.hexdigest()


@dataclass
class AcquisitionShare:
    """The acquisitions of one sharing block: picks by question, and how often one was reused.

    ``computed`` counts acquisitions run, ``shared`` calls answered from one already run.
    """

    rate_step: float = 0.025
    computed: int = 0
    shared: int = 0
    # Surrogates are held (not just their ids) so an id cannot be reused by a new object mid-block.
    _picks: dict[tuple[int, str], tuple[Any, np.ndarray]] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        if not (math.isfinite(self.rate_step) and 0 < self.rate_step <= 1):
            raise ValueError(f"rate_step must be in (0, 1] (a relative rate grid), got {self.rate_step!r}")

    def cell_rate(self, rate: float) -> float:
        """The rate an acquisition for ``rate`` runs at: its grid cell's geometric centre (0 stays 0)."""
        if rate <= 0:
            return float(rate)
        g = math.log1p(self.rate_step)
        k = math.floor(math.log(rate) / g)
        return float(math.exp((k + 0.5) * g))

    def picks(self, surrogate: Any, rate: float, question: tuple, acquire: Callable[[float], np.ndarray]) -> np.ndarray:
        """``acquire(cell rate)`` once per (surrogate, cell, ``question``); a copy of the picks after."""
        at = self.cell_rate(float(rate))
        key = (id(surrogate), _digest(at, *question))
        hit = self._picks.get(key)
        if hit is not None:
            self.shared += 1
            return hit[1].copy()
        idx = np.asarray(acquire(at))
        self._picks[key] = (surrogate, idx)
        self.computed += 1
        return idx.copy()


def active_share() -> AcquisitionShare | None:
    """The share of the innermost :func:`sharing_acquisitions` block, else None."""
    return _ACTIVE.get()


@contextlib.contextmanager
def sharing_acquisitions(rate_step: float = 0.025) -> Iterator[AcquisitionShare]:
    """Share profiling acquisitions inside the block (module doc); yields the share for its counts."""
    share = AcquisitionShare(rate_step=float(rate_step))
    token = _ACTIVE.set(share)
    try:
        yield share
    finally:
        _ACTIVE.reset(token)
