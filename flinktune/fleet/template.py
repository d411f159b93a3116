"""The commented ``fleet.yaml`` that ``flinktune fleet init`` writes, built from :class:`JobSettings` itself.

Use :func:`fleet_template` for the file's text: every setting a job may carry, with its meaning and its
default as a comment, then a ``defaults`` block and two example jobs. Built from the model's fields,
it cannot drift from what :func:`flinktune.fleet.load_fleet_file` accepts (a test loads it back).
"""

from __future__ import annotations

import textwrap

from flinktune.fleet.registry import JobSettings

__all__ = ["fleet_template"]


def _default(value: object) -> str:
    if value is None:
        return "unset"
    if isinstance(value, bool):
        return "true" if value else "false"
    return f"{value:g}" if isinstance(value, float) else str(value)


def fleet_template() -> str:
    """A commented fleet file with two example jobs; valid as written."""
    lines = [
        "# flinktune fleet: the jobs flinktune manages and each one's goals.",
        "# Check it with `flinktune fleet validate fleet.yaml`; list it with `flinktune fleet list --file fleet.yaml`.",
        "# A job's key overrides `defaults`; a bad key holds that job only (validate names it), the others go on.",
        "# On Kubernetes the same keys are annotations of a FlinkDeployment labelled flinktune.io/managed=true,",
        '# with dashes: flinktune.io/latency-target-ms: "800". Format: docs/fleet.md.',
        "#",
        "# Settings (default in brackets):",
    ]
    for name, info in JobSettings.model_fields.items():
        if name == "name":
            text = "Job name: lower-case letters, digits and dashes (a Kubernetes DNS-1123 label); required."
        else:
            text = f"{info.description} [{_default(info.default)}]"
        wrapped = textwrap.wrap(text, 100 - len(name) - 6)
        lines.append(f"#   {name}: {wrapped[0]}")
        lines += [f"#   {' ' * len(name)}  {more}" for more in wrapped[1:]]
    lines += [
        "",
        "defaults:                  # applied to every job below",
        "  latency_target_ms: 1000",
        "  recovery_limit_s: 180",
        "  dry_run: true            # decide and record only; set false once the decisions read right",
        "",
        "jobs:",
        "  - name: checkout",
        "    namespace: flink-jobs",
        "    kind: ysb              # jobs of one kind share what their surrogates learnt",
        "    latency_target_ms: 800",
        "  - name: clickstream",
        "    namespace: flink-jobs",
        "    kind: tsw",
        "    policy: flinktune",
        "    max_parallelism: 16",
        "",
    ]
    return "\n".join(lines)
