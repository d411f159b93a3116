"""Physical limits on every knob and rate that enters from outside (files, options, params).

Use :func:`check_int`, :func:`check_rate` and :func:`check_knobs` where a number is read, so that a
value no Flink job can have is refused in one line naming where it came from, instead of being
truncated (2.7 slots is not 2) or carried into a simulation (1e30 rec/s). The bounds are generous
physical ones, not the tuner's search space (:mod:`flinktune.config_space` narrows that).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

__all__ = ["KNOB_LIMITS", "MAX_PARALLELISM", "MAX_RATE", "LimitError", "check_int", "check_knobs", "check_number", "check_rate"]

#: Input rates at or above this (records per second, one job) are refused as unphysical.
MAX_RATE = 1e9
#: Flink's largest max-parallelism (key groups), so no job runs wider.
MAX_PARALLELISM = 32_768
#: ``knob: (kind, lowest, highest)``; kind "int" refuses fractions instead of truncating them.
KNOB_LIMITS: dict[str, tuple[str, float, float]] = {
    "parallelism": ("int", 1, MAX_PARALLELISM),
    "task_slots": ("int", 1, 256),
    "cpu": ("number", 0.01, 512),
    "memory_mb": ("int", 64, 4_194_304),
    "checkpoint_interval_s": ("int", 1, 86_400),
}


class LimitError(ValueError):
    """A number outside its physical range, or a fraction where a count is needed; names where."""


def check_number(value: Any, where: str, lo: float, hi: float) -> float:
    """``value`` as a finite float in ``[lo, hi]``, else :class:`LimitError`."""
    try:
        x = float(value)
    except (TypeError, ValueError):
        raise LimitError(f"{where}: {value!r} is not a number") from None
    if not math.isfinite(x) or not lo <= x <= hi:
        raise LimitError(f"{where}: {value!r} is outside the physical range [{lo:g}, {hi:g}]")
    return x


def check_int(value: Any, where: str, lo: float, hi: float) -> int:
    """``value`` as an int in ``[lo, hi]``; a fraction (2.7) is refused, a whole float (3.0) accepted."""
    if isinstance(value, bool):
        raise LimitError(f"{where}: {value!r} is not a whole number")
    x = check_number(value, where, lo, hi)
    if x != int(x):
        raise LimitError(f"{where}: {value!r} is not a whole number (counts are not rounded)")
    return int(x)


def check_rate(value: Any, where: str) -> float:
    """An input rate in records per second: finite, >= 0 and below :data:`MAX_RATE`."""
    x = check_number(value, where, 0.0, math.inf)
    if x >= MAX_RATE:
        raise LimitError(f"{where}: rate {value!r} rec/s is not below the physical limit {MAX_RATE:g} rec/s")
    return x


def check_knobs(data: Mapping[str, Any], where: str) -> dict[str, int | float]:
    """The knobs of ``data`` that :data:`KNOB_LIMITS` knows, each checked; others are left out."""
    out: dict[str, int | float] = {}
    for knob, (kind, lo, hi) in KNOB_LIMITS.items():
        if knob in data:
            check = check_int if kind == "int" else check_number
            out[knob] = check(data[knob], f"{where}: {knob}", lo, hi)
    return out
