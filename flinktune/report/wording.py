"""Plain words for the reasons a report renders: configurations as a person says them.

Use :func:`plain` on a decision's reason before showing it, and :func:`headline_and_detail` to
put the numbers that decided first and the diagnosis after. The policies write configurations in
the compact form of ``Configuration.describe()`` (``p16 x2 slots, 8 TM x (2 cpu, 2048 MB), ckpt
30 s``); a report says ``8 TaskManagers x (2 CPU, 2 GiB), 2 slots each, parallelism 16,
checkpoint every 30 s``.
"""

from __future__ import annotations

import re

__all__ = ["headline_and_detail", "plain", "plain_config"]

_CONFIG = re.compile(r"p(\d+) x(\d+) slots?, (\d+) TM x \(([\d.]+) cpu, (\d+) MB\), ckpt (\d+) s")
# "p24 fits" / "at p20 (utilization": a parallelism, never a latency quantile (p50, p90, p95, p99).
_PARALLELISM = re.compile(r"\bp(\d+)\b(?= fits| \(utilization)")
_GOALS = re.compile(r"P\(goals\)\s*(>=|=)\s*")


def _gib(mb: int) -> str:
    return f"{mb / 1024:g} GiB"


def plain_config(parallelism: int, slots: int, taskmanagers: int, cpu: float, memory_mb: int, checkpoint_s: int) -> str:
    """``24 TaskManagers x (1 CPU, 4 GiB), 1 slot each, parallelism 24, checkpoint every 10 s``."""
    tms = "TaskManager" if taskmanagers == 1 else "TaskManagers"
    return (
        f"{taskmanagers} {tms} x ({cpu:g} CPU, {_gib(memory_mb)}), {slots} slot{'' if slots == 1 else 's'} each, "
        f"parallelism {parallelism}, checkpoint every {checkpoint_s} s"
    )


def plain(reason: str) -> str:
    """``reason`` with every compact configuration and shorthand spelled out."""
    text = _CONFIG.sub(lambda m: plain_config(int(m[1]), int(m[2]), int(m[3]), float(m[4]), int(m[5]), int(m[6])), str(reason))
    text = _PARALLELISM.sub(lambda m: f"parallelism {m[1]}", text)
    return _GOALS.sub(lambda m: "probability of meeting the goals " + ("at least " if m[1] == ">=" else ""), text)


def headline_and_detail(reason: str) -> tuple[str, str]:
    """(what decided, the diagnosis after it): the policies append their bottleneck analysis after `` / ``."""
    head, _, detail = plain(reason).partition(" / ")
    return head.strip(), detail.strip()
