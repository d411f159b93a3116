"""Torch intra-op thread policy for the small models of this package.

Use :func:`single_thread` around CPU fits and predictions of small models (exact GPs with a few
hundred points, a TiDE network with a few thousand windows). Their matrices are too small for
extra threads to pay off; on a busy node the threads' spin-waits made a 3 s GP fit take 18 s
(measured on 2 cores), so one thread is both faster and kinder to neighbours.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

__all__ = ["single_thread"]


@contextlib.contextmanager
def single_thread(enabled: bool = True) -> Iterator[None]:
    """Run torch CPU ops on one intra-op thread inside the block, restoring the setting after."""
    if not enabled:
        yield
        return
    import torch  # here, not at import: a replay without models never loads it

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(before)
