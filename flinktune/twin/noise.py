"""Counter-based seeded randomness for the twin: the draw for second ``t`` depends only on (seed, stream, t).

Use these instead of a stateful generator wherever the twin draws per simulated second (latency
noise, random failures, memory samples). Because a draw is a pure function of its counter, running
18 h in one call, hour by hour, or across a save/load gives the same numbers, and a persisted twin
needs nothing but its seed to continue the same random stream.

Shapes: ``t`` is an int array of epoch seconds (any shape); results have the same shape.
"""

from __future__ import annotations

import numpy as np
from scipy.special import ndtri

__all__ = ["STREAMS", "normal", "uniform"]

#: Named, independent streams (the integer keeps old streams stable when new ones are added).
STREAMS: dict[str, int] = {
    "latency": 1,
    "failure": 2,
    "memory": 3,
    "cpu": 4,
    "workload": 5,
    "observation": 6,
    "busy": 7,
}

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)


def _splitmix(x: np.ndarray) -> np.ndarray:
    # SplitMix64 finaliser: a bijective avalanche mix of a 64-bit counter (wrapping arithmetic).
    with np.errstate(over="ignore"):
        z = x + _GOLDEN
        z = (z ^ (z >> np.uint64(30))) * _M1
        z = (z ^ (z >> np.uint64(27))) * _M2
        return z ^ (z >> np.uint64(31))


def _key(seed: int, stream: str) -> np.ndarray:
    if stream not in STREAMS:
        raise KeyError(f"unknown noise stream {stream!r}; known: {sorted(STREAMS)}")
    s = np.array([int(seed) & 0xFFFFFFFFFFFFFFFF], dtype=np.uint64)
    k = _splitmix(s) ^ _splitmix(np.array([STREAMS[stream]], dtype=np.uint64) * _GOLDEN)
    return _splitmix(k)


def uniform(seed: int, stream: str, t: np.ndarray | int, *, lane: int = 0) -> np.ndarray:
    """Uniform draws in (0, 1), one per counter in ``t``; ``lane`` gives independent draws per counter."""
    t_arr = np.asarray(t, dtype=np.int64).astype(np.uint64)
    key = _key(seed, stream)
    with np.errstate(over="ignore"):
        x = _splitmix(key ^ _splitmix(t_arr * np.uint64(2654435761) + np.uint64(lane) * _M2))
    return ((x >> np.uint64(11)).astype(np.float64) + 0.5) * (1.0 / 9007199254740992.0)


def normal(seed: int, stream: str, t: np.ndarray | int, *, lane: int = 0) -> np.ndarray:
    """Standard normal draws, one per counter in ``t`` (inverse CDF of :func:`uniform`)."""
    return ndtri(uniform(seed, stream, t, lane=lane))
