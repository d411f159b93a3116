"""The robustness benchmark: every policy over a matrix of scenarios it was not tuned on, against a latency SLO and the bound.

``python -m benchmarks.policy.robustness --matrix benchmarks/robustness_matrix.csv --seeds 1-2
--policies static,flinktune,reactive,autoscaler,demeter,ds2,hindsight-fixed --workers 2 --out docs/results/robustness.md
[--scenarios NAME,...] [--data DIR] [--profile-ads PATH] [--resume]``

Use it to see whether a policy change holds beyond the ADS job and the two generators: each line of
the matrix file (:mod:`benchmarks.policy.scenario_matrix`) is a trace on a perturbed cluster profile with
its latency target, every policy is replayed on every seed through the real decision loop as
``flinktune replay`` does (:func:`flinktune.replay.harness.prepare_replay`), and the page
(Markdown, a JSON beside it, rewritten after every scenario) gives per scenario and policy the
figures, the SLO met or missed and, over all scenarios, each policy's share meeting the SLO and
being the cheapest that does (:data:`DETAILS`).
"""

from __future__ import annotations

import argparse
import copy
import hashlib
import json
import multiprocessing
import os
import shlex
import sys
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from benchmarks.policy.fixed_hindsight import HINDSIGHT, cheapest_fixed, minutes_over_target
from benchmarks.policy.replay_bound import bound_for_rates, bound_with_changes
from benchmarks.policy.replay_seeds import parse_seeds
from benchmarks.policy.robustness_page import MINUTES_ALLOWANCE, P95_LIMIT, scenario_table, summary, write
from benchmarks.policy.scenario_matrix import (
    Scenario,
    load_matrix,
    scenario_profile,
    scenario_trace,
)
from flinktune.config_space import default_space
from flinktune.entry import OneLineParser, run_main
from flinktune.pricing import PriceList, load_prices
from flinktune.replay.harness import ReplaySettings, prepare_replay
from flinktune.replay.harness import run_replay as run_rig
from flinktune.replay.models import FORECASTERS
from flinktune.replay.runner import resolve_policies
from flinktune.twin.failures import parse_failures
from flinktune.twin.mechanics import steady_state
from flinktune.twin.profile import ClusterProfile
from flinktune.twin.workload import WORKLOADS

ROOT = Path(__file__).resolve().parents[2]

__all__ = ["DETAILS", "P95_LIMIT", "SLOW_FIRST", "code_version", "main", "minutes_over_target", "run"]
__all__ += ["scenario_bounds", "scenario_table", "summary"]

PROG = "python -m benchmarks.policy.robustness"
#: The rules, as ``--help`` prints them after the description.
DETAILS = """\
Per policy: CPU, memory, priced cost and p95 relative to static; minutes over the absolute target
(minutes whose p95, the 95th percentile of the minute's per-second p95 samples, exceeds it);
recoveries over the limit; changes; CPU over the replay bound (benchmarks/policy/replay_bound.py: per
second, and with at most the policy's own number of changes). The twin's seed and failure times
are the same for every policy of a seed. The SLO of a scenario: p95 <= 1.5x static's, minutes over
the target <= static's + 1 % of the replayed minutes, no recovery over the limit; judged on the
mean over seeds and on each seed. Cheapest: the lowest priced cost of the policies meeting the SLO
(the oracle and hindsight-fixed are references, not competitors). hindsight-fixed: the cheapest
configuration held all the time that meets the SLO, found by replaying the trace with hindsight
(benchmarks/policy/fixed_hindsight.py); a policy that changes the job must cost less to have earned its changes.

--resume keeps the JSON's results: a policy's row is reused when the scenario's settings, the
seed's trace and profile, and the flinktune code (a digest of the package's source) are the same;
the other policies' rows stay as they are, so after a change to one policy `--policies flinktune
--resume` reruns only it (and static, the reference, when the code moved). A scenario enters the
page only when all its replays are done, so a stopped run keeps what it finished. --workers N
replays (scenario, seed, policy) units in N spawned processes, slowest first within a scenario,
without a wait between scenarios; a model policy's replay (flinktune, demeter) always gets a fresh
process of its own, so its result does not depend on what ran before it. Bad input (an unknown trace, profile, transform or
perturbation, a malformed matrix line, a missing file) is one line naming file:line and exit
code 2, before any replay.
"""
DEFAULT_DATA = ROOT.parent / "shared" / "data" / "demeter-ads"
#: Replayed first within a scenario, so the pool's processes finish together (the model policies profile and fit).
SLOW_FIRST = ("demeter", "flinktune")


def code_version() -> str:
    """A digest of the flinktune package's source and resources: a stored row is reused only under the same code."""
    h = hashlib.sha256()
    pkg = ROOT / "flinktune"
    for p in sorted(pkg.rglob("*")):
        if p.suffix in (".py", ".yaml", ".yml", ".json") and p.is_file() and "__pycache__" not in p.parts:
            h.update(str(p.relative_to(pkg)).encode())
            h.update(p.read_bytes())
    return h.hexdigest()[:12]


def _digest(*parts: Any) -> str:
    h = hashlib.sha256()
    for p in parts:
        h.update(p.tobytes() if isinstance(p, np.ndarray) else str(p).encode())
    return h.hexdigest()[:12]


#: The per-second bound's keys, the same for every seed of a trace file.
_PER_SECOND = ("per_second", "single_shape", "clipped_share", "clip_rate")


def _replay_one(
    name: str, trace: pd.Series, profile: ClusterProfile, settings: ReplaySettings, options: dict[str, float] | None
) -> dict[str, Any]:
    """One policy's replay (what :func:`flinktune.replay.harness.replay_policy` does, keeping the twin's
    per-second history for the minutes over target), or the fixed configuration found in hindsight
    (:data:`HINDSIGHT`); runs in a pool process."""
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    t0, c0 = time.perf_counter(), time.process_time()
    if name == HINDSIGHT:
        found = cheapest_fixed(
            trace,
            profile,
            default_space(),
            load_prices(),
            seed=settings.seed,
            failures=settings.failures,
            target_ms=settings.latency_target_ms,
            limit_s=settings.recovery_limit_s,
            p95_limit=P95_LIMIT,
            allowance=MINUTES_ALLOWANCE,
        )
        return {**found, "wall_s": time.perf_counter() - t0, "cpu_s": time.process_time() - c0}
    rig = prepare_replay(name, trace, profile, default_space(), settings, policy_options=options)
    run = run_rig(rig, trace, started=t0)
    return {
        "summary": run.summary,
        "minutes_over": minutes_over_target(rig.twin.history(), settings.latency_target_ms),
        "wall_s": time.perf_counter() - t0,
        "cpu_s": time.process_time() - c0,
    }


def _static_carry(rates: np.ndarray, profile: ClusterProfile, recovery_limit_s: float) -> float:
    """The highest rate (50 rec/s steps) static max carries and recovers from within the limit."""
    grid = np.arange(1000.0, max(rates.max() * 1.3, 2000.0), 50.0)
    ss = steady_state(profile, default_space().maximum, grid)
    ok = (ss["recovery_s"] <= recovery_limit_s) & (ss["throughput"] >= grid * 0.9999)
    return float(grid[ok].max()) if ok.any() else 0.0


def scenario_bounds(
    rates: np.ndarray,
    profile: ClusterProfile,
    recovery_limit_s: float,
    changes: Sequence[int],
    per_second: dict[str, float] | None = None,
) -> dict[str, Any]:
    """The replay bound on ``rates``: per second, best single shape and, for each count of ``changes``, capped at it.

    Seconds above what static max carries within the recovery limit (a scaled-up trace) are bounded
    at that rate (``clipped_share`` says how many): every policy is at static there or worse, so
    the figure stays a lower bound. ``per_second``: a bound already computed on the same rates."""
    rates = np.asarray(rates, dtype=float)
    out: dict[str, Any] = dict(per_second or {})
    if "per_second" not in out:
        level = _static_carry(rates, profile, recovery_limit_s)
        if level <= 0:
            return {
                "per_second": float("nan"),
                "single_shape": float("nan"),
                "clipped_share": 1.0,
                "clip_rate": 0.0,
                "capped": {},
            }
        clip = level if rates.max() > level else None
        out.update(
            bound_for_rates(np.minimum(rates, level) if clip else rates, profile, recovery_limit_s),
            clipped_share=float((rates > level).mean()) if clip else 0.0,
            clip_rate=clip,
        )
    clip = out.get("clip_rate")
    capped_rates = np.minimum(rates, clip) if clip else rates
    ks = sorted({int(k) for k in changes})
    out["capped"] = {str(k): v for k, v in bound_with_changes(capped_rates, profile, recovery_limit_s, ks).items()} if ks else {}
    return out


def _shown(path: str | Path) -> str:
    """``path`` as the page shows it: relative to the repository when it is inside it or beside it, else absolute."""
    full = os.path.abspath(path)  # not resolved: a linked data folder keeps the name it is given by
    rel = os.path.relpath(full, ROOT)
    return rel if not rel.startswith(os.path.join("..", "..")) else full


def _log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def run(
    matrix: str | Path,
    *,
    seeds_text: str = "1-2",
    policies: str = f"static,flinktune,reactive,autoscaler,demeter,ds2,{HINDSIGHT}",
    scenarios: str | None = None,
    data: str | Path = DEFAULT_DATA,
    profile_ads: str | Path | None = None,
    failures: str = "every:45m",
    recovery_limit_s: float = 180.0,
    forecaster: str = "peak",
    workers: int = 2,
    out: str | Path = ROOT / "docs" / "results" / "robustness.md",
    resume: bool = False,
    command: str = "",
    prices: PriceList | None = None,
) -> dict[str, Any]:
    """Replay ``policies`` on every (selected) scenario of ``matrix`` and seed; write the page and JSON after
    each scenario; returns the results as stored in the JSON."""
    # Every input is checked, and every trace and profile built, before the first replay: a bad one costs nothing.
    all_scenarios = load_matrix(matrix)
    chosen = all_scenarios
    if scenarios:
        names = [s.strip() for s in scenarios.split(",") if s.strip()]
        known = {sc.name for sc in all_scenarios}
        unknown = [n for n in names if n not in known]
        if unknown:
            raise ValueError(f"--scenarios: unknown scenario(s) {unknown} in {matrix}; known: {', '.join(sorted(known))}")
        chosen = [sc for sc in all_scenarios if sc.name in names]
    seeds = parse_seeds(seeds_text)
    parse_failures(failures)
    # The fixed configuration found in hindsight is a reference row, not a policy of the decision loop.
    names = [p.strip() for p in policies.split(",")]
    pols = resolve_policies(",".join(p for p in names if p != HINDSIGHT)) + ([HINDSIGHT] if HINDSIGHT in names else [])
    if workers < 1:
        raise ValueError(f"--workers must be >= 1, got {workers}")
    data = Path(data)
    if not data.is_dir():
        raise ValueError(f"--data {str(data)!r}: not a folder")
    if profile_ads is not None and not Path(profile_ads).is_file():
        raise ValueError(f"--profile-ads {str(profile_ads)!r}: no such file")
    prices = prices or load_prices()
    out = Path(out)
    version = code_version()
    results: dict[str, Any] = {
        "kind": "robustness",
        "command": command,
        "matrix": _shown(matrix),
        "data": _shown(data),
        "profile_ads": _shown(profile_ads) if profile_ads is not None else None,
        "earlier_commands": [],
        "seeds_text": seeds_text,
        "policies": pols,
        "failures": failures,
        "recovery_limit_s": recovery_limit_s,
        "forecaster": forecaster,
        "prices": prices.describe(),
        "code_version": version,
        "scenarios": {},
    }
    if resume and out.with_suffix(".json").exists():
        try:
            old = json.loads(out.with_suffix(".json").read_text())
        except (OSError, ValueError) as exc:
            raise ValueError(f"--resume: cannot read {out.with_suffix('.json')}: {exc}") from None
        if old.get("kind") != "robustness":
            raise ValueError(f"--resume: {out.with_suffix('.json')} is not a robustness result")
        results["scenarios"] = old.get("scenarios", {})
        earlier = [*old.get("earlier_commands", []), old.get("command", "")]
        results["earlier_commands"] = [c for c in dict.fromkeys(earlier) if c and c != command][-10:]

    units: list[tuple[Scenario, ClusterProfile, dict[int, tuple[pd.Series | None, pd.Series, str]]]] = []
    for sc in chosen:
        prof = scenario_profile(sc, data, profile_ads)
        traces = {seed: scenario_trace(sc, data, seed) for seed in seeds}
        units.append((sc, prof, traces))

    # What is left to replay: a stored row is reused under the same settings, trace, profile and code.
    plan: dict[str, list[tuple[int, str]]] = {}
    work: dict[str, dict[str, Any]] = {}
    for sc, prof, traces in units:
        settings = {
            **sc.settings(),
            "failures": failures,
            "recovery_limit_s": recovery_limit_s,
            "forecaster": forecaster,
            "profile_digest": _digest(prof.model_dump_json()),
        }
        entry = copy.deepcopy(results["scenarios"].get(sc.name))
        if entry is not None and entry.get("settings") != settings:
            _log(f"{sc.name}: its settings or profile differ from the stored ones: replayed afresh")
            entry = None
        entry = entry or {"settings": settings, "seeds": {}}
        work[sc.name] = entry  # into the results when the scenario is finished: a stopped run shows only whole ones
        todo: list[tuple[int, str]] = []
        for seed, (history, series, _) in traces.items():
            digest = _digest(series.to_numpy(), history.to_numpy() if history is not None else "")
            stored = entry["seeds"].get(str(seed))
            if stored is None or stored.get("trace_digest") != digest:
                stored = {"trace_digest": digest, "minutes": int(np.ceil(len(series) / 60)), "policies": {}, "bound": {}}
                entry["seeds"][str(seed)] = stored
            for p in pols:
                row = stored["policies"].get(p)
                if row is None or row.get("code_version") != version:
                    todo.append((seed, p))
        plan[sc.name] = sorted(todo, key=lambda t: (SLOW_FIRST.index(t[1]) if t[1] in SLOW_FIRST else len(SLOW_FIRST), t[0]))

    total = sum(len(t) for t in plan.values())
    _log(f"{len(units)} scenario(s), {total} replay(s) to run ({'none' if not total else f'{workers} worker(s)'}) -> {out}")
    t_start = time.perf_counter()
    done = 0

    def finish(sc: Scenario, prof: ClusterProfile, traces: dict[int, Any]) -> None:
        """The scenario's bounds (only what is missing: the capped bound at a change count not seen yet), then the files."""
        entry = work[sc.name]
        shared: dict[str, Any] | None = None
        for seed, (_, series, _) in traces.items():
            stored = entry["seeds"][str(seed)]
            # Rows in the order asked for (static first), whatever order the pool finished them in.
            rank = {p: i for i, p in enumerate(pols)}
            stored["policies"] = dict(sorted(stored["policies"].items(), key=lambda kv: (rank.get(kv[0], len(rank)), kv[0])))
            changes = sorted({int(r["summary"]["reconfigurations"]) for r in stored["policies"].values()})
            b = stored.get("bound") or {}
            if "per_second" not in b or any(str(k) not in b.get("capped", {}) for k in changes):
                known = {k: b[k] for k in _PER_SECOND if k in b} or shared
                stored["bound"] = scenario_bounds(series.to_numpy(), prof, recovery_limit_s, changes, per_second=known)
            if sc.trace not in WORKLOADS:  # a file's replayed span is the same on every seed
                shared = {k: stored["bound"][k] for k in _PER_SECOND}
        results["scenarios"][sc.name] = entry
        write(results, out, prices, all_scenarios)

    def record(sc: Scenario, seed: int, p: str, res: dict[str, Any]) -> float:
        nonlocal done
        done += 1
        work[sc.name]["seeds"][str(seed)]["policies"][p] = {**res, "code_version": version}
        _log(f"[{done}/{total}] {sc.name} seed {seed} {p}: {res['wall_s']:.0f} s ({time.perf_counter() - t_start:.0f} s in all)")
        return float(res["wall_s"])

    def unit_args(sc: Scenario, prof: ClusterProfile, traces: dict[int, Any], seed: int, p: str) -> tuple[Any, ...]:
        history, series, workload = traces[seed]
        st = ReplaySettings(
            workload=workload,
            failures=failures,
            seed=seed,
            forecaster=forecaster,
            latency_target_ms=sc.latency_target_ms,
            recovery_limit_s=recovery_limit_s,
            history=history,
        )
        return (p, series, prof, st, sc.policy_options.get(p))

    def outcome(sc: Scenario, seed: int, p: str, get: Callable[[], dict[str, Any]]) -> dict[str, Any]:
        try:
            return get()
        except Exception as exc:  # the unit is named; the scenarios already written stay
            raise RuntimeError(f"{sc.name} seed {seed} {p}: the replay failed: {type(exc).__name__}: {exc}") from exc

    # A model policy's replays always run one per spawned process (see the pool below), --workers 1 included.
    if workers <= 1 and not set(pols) & set(SLOW_FIRST):
        for sc, prof, traces in units:
            spent = 0.0
            for seed, p in plan[sc.name]:
                args = unit_args(sc, prof, traces, seed, p)
                spent += record(sc, seed, p, outcome(sc, seed, p, partial(_replay_one, *args)))
            _finish_log(sc, plan, spent)
            finish(sc, prof, traces)
    else:
        # Spawned, not forked (as flinktune.replay.runner): the caller may hold threads. One replay
        # per process: a model policy's replay run after others in the same process came out
        # differently from the same replay alone (63 against 22 minutes over target on ysb-on-tsw),
        # so a result must not depend on what ran before it.
        pool = ProcessPoolExecutor(
            max_workers=max(workers, 1), mp_context=multiprocessing.get_context("spawn"), max_tasks_per_child=1
        )
        try:
            futures = [
                (
                    sc,
                    prof,
                    traces,
                    [(s, p, pool.submit(_replay_one, *unit_args(sc, prof, traces, s, p))) for s, p in plan[sc.name]],
                )
                for sc, prof, traces in units
            ]
            # Scenarios are written in matrix order; the pool takes their replays in the same order.
            for sc, prof, traces, futs in futures:
                spent = 0.0
                pending = {f: (s, p) for s, p, f in futs}
                for f in as_completed(pending):
                    s, p = pending[f]
                    spent += record(sc, s, p, outcome(sc, s, p, f.result))
                _finish_log(sc, plan, spent)
                finish(sc, prof, traces)
        finally:
            # On an error or Ctrl-C the queued replays are dropped; only the running ones are waited for.
            pool.shutdown(wait=True, cancel_futures=True)
    if not units:
        write(results, out, prices, all_scenarios)
    results["out"] = str(out)
    return results


def _finish_log(sc: Scenario, plan: dict[str, list[tuple[int, str]]], spent: float) -> None:
    if plan[sc.name]:
        _log(f"{sc.name}: {len(plan[sc.name])} replay(s), {spent:.0f} s of replay time")
    else:
        _log(f"{sc.name}: already in the results with the same settings and code: skipped")


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    args = list(sys.argv[1:] if argv is None else argv)
    p = OneLineParser(prog=PROG, description=__doc__, epilog=DETAILS, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--matrix", default=str(ROOT / "benchmarks" / "robustness_matrix.csv"), help="the scenario matrix (CSV)")
    p.add_argument("--seeds", default="1-2", help="seeds, e.g. 1-2, 7 or 1-3,9")
    p.add_argument(
        "--policies",
        default=f"static,flinktune,reactive,autoscaler,demeter,ds2,{HINDSIGHT}",
        help=f"comma-separated policy names or 'all' (static, the reference, is always included), and {HINDSIGHT} "
        "for the cheapest fixed configuration that meets the SLO, found in hindsight",
    )
    p.add_argument("--scenarios", default=None, help="only these scenarios of the matrix (comma-separated names)")
    p.add_argument(
        "--data", default=str(DEFAULT_DATA), help="folder in the demeter-ads format: trace_x3.csv, relative CSV/YAML paths"
    )
    p.add_argument("--profile-ads", default=None, help="a calibrated profile YAML to use wherever the matrix says 'ads'")
    p.add_argument("--failures", default="every:45m")
    p.add_argument("--recovery-limit-s", type=float, default=180.0)
    p.add_argument("--forecaster", default="peak", choices=list(FORECASTERS))
    p.add_argument("--workers", type=int, default=2, help="processes replaying (scenario, seed, policy) units side by side")
    p.add_argument(
        "--resume",
        action="store_true",
        help="keep the JSON's rows made with the same settings and code (without it the page and JSON start afresh)",
    )
    p.add_argument("--out", default=str(ROOT / "docs" / "results" / "robustness.md"), help="Markdown file; a .json beside it")
    a = p.parse_args(args)
    command = "python -m benchmarks.policy.robustness " + shlex.join(x for x in args if x != "--debug")
    return run(
        a.matrix,
        seeds_text=a.seeds,
        policies=a.policies,
        scenarios=a.scenarios,
        data=a.data,
        profile_ads=a.profile_ads,
        failures=a.failures,
        recovery_limit_s=a.recovery_limit_s,
        forecaster=a.forecaster,
        workers=a.workers,
        out=a.out,
        resume=a.resume,
        command=command,
    )


if __name__ == "__main__":
    sys.exit(run_main(PROG, main))
