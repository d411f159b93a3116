"""The decision task: ``python -m jobs.decide --job demo --ticks 6 --policy flinktune`` makes the job's
decisions (:func:`flinktune.runs.decide.decide`: one on a real cluster, ``--ticks`` on the twin; a dry
run, advice only, unless ``--apply`` and the job's mode is act) and prints a JSON summary. On the twin,
``--models FILE`` takes the models from a saved ``ReplayModels`` instead of the MLflow champions.
"""

from __future__ import annotations

import json
from pathlib import Path

from flinktune.entry import OneLineParser, run_main
from flinktune.policies import POLICY_NAMES
from flinktune.runs.decide import decide as run

__all__ = ["main", "run"]


def main(argv: list[str] | None = None) -> int:
    """``python -m jobs.decide``: one line and exit code 2 on a known error (see :mod:`flinktune.entry`)."""
    return run_main("python -m jobs.decide", _main, argv)


def _main(argv: list[str]) -> None:
    p = OneLineParser(prog="python -m jobs.decide", description=__doc__)
    p.add_argument("--job", required=True)
    p.add_argument("--ticks", type=int, default=1)
    p.add_argument("--policy", choices=POLICY_NAMES, default="flinktune")
    p.add_argument("--apply", action="store_true", help="act on a job whose mode is act (default: a dry run, advice only)")
    p.add_argument("--models", type=Path, default=None, help="twin only: a saved ReplayModels instead of the MLflow champions")
    a = p.parse_args(argv)
    print(json.dumps(run(job=a.job, ticks=a.ticks, policy=a.policy, apply=a.apply, models_file=a.models)))


if __name__ == "__main__":
    raise SystemExit(main())
