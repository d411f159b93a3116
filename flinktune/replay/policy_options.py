"""Per-policy settings for a replay, given on the command line as ``POLICY.ARGUMENT=NUMBER``.

Use :func:`parse_policy_options` on the repeated ``--policy-option`` values of ``flinktune replay``
or ``benchmarks/policy/replay_seeds.py``, then :func:`check_policy_options` against the replayed policies
before any replay starts, so a typo costs nothing. They set a baseline to its published setting,
e.g. ``reactive.target_utilization=0.35`` for the reactive HPA that Demeter's evaluation measured.
"""

from __future__ import annotations

from collections.abc import Sequence

from flinktune.config_space import default_space
from flinktune.policies import POLICY_NAMES, make_policy
from flinktune.quantities import UTILIZATION, check, finite

__all__ = ["check_policy_options", "describe_policy_options", "parse_policy_options"]


def parse_policy_options(items: Sequence[str]) -> dict[str, dict[str, float]]:
    """``["reactive.target_utilization=0.35", ...]`` -> ``{"reactive": {"target_utilization": 0.35}}``.

    ValueError naming the bad item when one is not ``POLICY.ARGUMENT=NUMBER``."""
    out: dict[str, dict[str, float]] = {}
    for item in items:
        head, eq, value = item.partition("=")
        name, dot, key = head.partition(".")
        if not (eq and dot and name and key.isidentifier()):
            raise ValueError(f"--policy-option {item!r}: expected POLICY.ARGUMENT=NUMBER, e.g. reactive.target_utilization=0.35")
        number = finite(value, f"--policy-option {item!r}")
        if key.endswith(("utilization", "_fraction")):
            number = check(UTILIZATION, number, f"--policy-option {head}")
        out.setdefault(name, {})[key] = number
    return out


def check_policy_options(options: dict[str, dict[str, float]], names: Sequence[str]) -> None:
    """ValueError when an option names a policy that is not replayed (``names``) or an argument its
    constructor refuses; the policy is built once on the default space to find out."""
    for name, opts in options.items():
        if name not in POLICY_NAMES:
            raise ValueError(f"--policy-option {name}.*: unknown policy {name!r}; known: {', '.join(POLICY_NAMES)}")
        if name not in names:
            raise ValueError(f"--policy-option {name}.*: {name!r} is not replayed (policies: {', '.join(names)})")
        try:
            make_policy(name, default_space(), **opts)
        except TypeError as exc:
            known = _arguments(name)
            raise ValueError(
                f"--policy-option {name}.*: the {name} policy refused {opts}: {exc}"
                + (f"; its numeric arguments: {', '.join(known)}" if known else "")
            ) from None


def _arguments(name: str) -> list[str]:
    """The numeric keyword arguments of policy ``name``'s class (what ``--policy-option`` can set)."""
    import inspect

    policy = make_policy(name, default_space())
    params = inspect.signature(type(policy).__init__).parameters.values()
    return [p.name for p in params if isinstance(p.default, (int, float)) and not isinstance(p.default, bool)]


def describe_policy_options(options: dict[str, dict[str, float]]) -> str:
    """The options as command-line text, ``" --policy-option reactive.target_utilization=0.35"`` (empty when none)."""
    return "".join(f" --policy-option {n}.{k}={v:g}" for n, o in options.items() for k, v in o.items())
