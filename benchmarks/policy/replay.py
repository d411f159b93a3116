"""Replay benchmark: every policy on the built-in 18 h traces, failures every 45 min (docs/DESIGN.md section 7).

``python -m benchmarks.policy.replay [--traces ysb,tsw] [--hours 18] [--seed 7] [--forecaster peak] [--out docs/results]``
writes ``replay-<trace>.md`` / ``.json`` / plots per trace (see :mod:`flinktune.replay`).
The same as ``flinktune replay --trace ysb --policies all --hours 18 --failures every:45m --seed 7 --forecaster peak``.
The forecaster defaults to ``peak`` (the direct peak model), as in ``flinktune replay``; ``naive`` reproduces rounds 1-3.
"""

from __future__ import annotations

import argparse
import json

from flinktune.replay import cli_replay
from flinktune.replay.models import FORECASTERS


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--traces", default="ysb,tsw")
    p.add_argument("--policies", default="all")
    p.add_argument("--hours", type=float, default=18.0)
    p.add_argument("--failures", default="every:45m")
    p.add_argument("--seed", type=int, default=7)
    p.add_argument(
        "--forecaster",
        default="peak",
        choices=list(FORECASTERS),
        help="forecaster of the model-based policies (default peak: quantiles of the next "
        "10 min's peak, seasonal naive until 31 min of history)",
    )
    p.add_argument(
        "--watch-every-s",
        type=int,
        default=60,
        help="seconds between the watch's checks that let flinktune decide early when the backlog grows (0: off)",
    )
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--out", default="docs/results")
    a = p.parse_args(argv)
    for trace in a.traces.split(","):
        cmd = (
            f"python -m benchmarks.policy.replay --traces {trace} --policies {a.policies} --hours {a.hours:g} --failures {a.failures} "
            f"--seed {a.seed} --forecaster {a.forecaster} --watch-every-s {a.watch_every_s} --out {a.out}"
        )
        res = cli_replay(
            trace,
            a.policies,
            a.hours,
            a.failures,
            a.seed,
            a.out,
            forecaster=a.forecaster,
            workers=a.workers,
            command=cmd,
            watch_every_s=a.watch_every_s,
        )
        print(json.dumps(res))


if __name__ == "__main__":
    main()
