"""Profiling runs on the twin -> ``curated/profiling_observations/job=<job>/part-<runhash>.parquet``.

``python -m jobs.profile --job demo`` runs :func:`flinktune.runs.twin_profiling.profile_on_twin` (the
flinktune policy's start-up design, or ``--configs`` at ``--rates``) and prints ``{rows, path}``.
"""

from __future__ import annotations

import json

from flinktune.entry import OneLineParser, run_main
from flinktune.runs.twin_profiling import profile_on_twin as run
from flinktune.twin.profiling import PROFILE_RUN_S

__all__ = ["main", "run"]


def main(argv: list[str] | None = None) -> int:
    """``python -m jobs.profile``: one line and exit code 2 on a known error (see :mod:`flinktune.entry`)."""
    return run_main("python -m jobs.profile", _main, argv)


def _main(argv: list[str]) -> None:
    p = OneLineParser(prog="python -m jobs.profile", description=__doc__.splitlines()[0])
    p.add_argument("--job", required=True, help="job (FlinkDeployment) name")
    p.add_argument("--configs", default=None, help="JSON list of configurations (knob mappings); default: initial design")
    p.add_argument("--rates", default=None, help="comma-separated rates, rec/s; default: from the job's simulated input")
    p.add_argument("--duration-s", type=int, default=PROFILE_RUN_S, help="seconds per profiling run before the failure")
    p.add_argument(
        "--design",
        choices=("startup", "space"),
        default="startup",
        help="default configurations: the policy's start-up shapes, or a space-filling design",
    )
    p.add_argument("--seed", type=int, default=0)
    a = p.parse_args(argv)
    try:
        configs = json.loads(a.configs) if a.configs else None
    except ValueError as exc:
        raise ValueError(f"--configs is not JSON ({exc}); give a JSON list of knob mappings") from None
    if configs is not None and not isinstance(configs, list):
        raise ValueError(f"--configs must be a JSON list of knob mappings, got {type(configs).__name__}")
    try:
        rates = [float(x) for x in a.rates.split(",")] if a.rates else None
    except ValueError:
        raise ValueError(f"--rates {a.rates!r}: give comma-separated numbers (rec/s)") from None
    print(json.dumps(run(job=a.job, configs=configs, rates=rates, duration_s=a.duration_s, seed=a.seed, design=a.design)))


if __name__ == "__main__":
    raise SystemExit(main())
