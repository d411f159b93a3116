"""Saving and loading a surrogate's state as one torch file.

Use :class:`TorchStateFile` as a base of a surrogate class that has ``state()`` (tensors and plain
values) and a ``from_state(state, device=...)`` classmethod; it adds ``save(path)`` (written
atomically: a temp name, then a rename) and ``load(path, device=...)`` (``weights_only``, so a
file cannot run code when read).
"""

from __future__ import annotations

from pathlib import Path

import torch

from flinktune.lake.atomic import atomic_write_with

__all__ = ["TorchStateFile"]


class TorchStateFile:
    """``save``/``load`` for classes with ``state()`` and ``from_state(state, device=...)``."""

    def save(self, path: str | Path) -> Path:
        """Write ``self.state()`` to ``path`` with ``torch.save`` (temp name, then rename)."""
        state = self.state()  # type: ignore[attr-defined]
        return atomic_write_with(path, lambda tmp: torch.save(state, tmp))

    @classmethod
    def load(cls, path: str | Path, *, device: str = "cpu"):
        """Read a file written by :meth:`save` (tensors and plain values only: ``weights_only``)."""
        return cls.from_state(torch.load(Path(path), map_location="cpu", weights_only=True), device=device)  # type: ignore[attr-defined]
