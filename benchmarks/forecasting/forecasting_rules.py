"""Re-choose the planning and peak rules on saved backtests: the rule choice's effect on the same forecasts.

Run: ``.venv/bin/python -m benchmarks.forecasting.forecasting_rules FILE`` where FILE is what
``benchmarks/forecasting/forecasting.py --save-backtests FILE`` wrote. For every trace, model and variant of the
rule choice (``plain``: the point estimate and the plain minimum, every model choosing a peak factor; ``peak-1se``: the one-standard-error peak rule; ``planning-ucb``: the
upper-bound planning rule; ``both``: the two guards; ``direct-x1``: as ``plain`` but models that
forecast the peak directly keep the plain peak, the default), the rules are chosen again on the saved selection
forecasts (:func:`models.forecasting.backtest.choose_rules`), the report forecasts scored with them
(:func:`~models.forecasting.backtest.summarize`) and the champion chosen
(:func:`models.forecasting.champion.choose_champion`). No model is fitted, so the variants differ only
in the rule choice. Prints one Markdown table per variant: peak MAE relative to Demeter's (under the
same variant) and the under-forecast rate / over-provisioning of the planning rule.

``--ensemble`` adds a ``darts-peak-ensemble`` row to traces saved without one but with both darts peak
models: its forecasts are the quantile-wise mean of theirs, origin by origin
(:func:`models.forecasting.peak_ensemble.ensemble_backtest`), which is what the ensemble forecasts
when fitted on the same data (its members are those models, fitted alike); its fit and predict
times are the members' sums.
"""

from __future__ import annotations

import argparse
import pickle

from benchmarks.forecasting.forecasting import CHAMPION_CANDIDATES
from models.forecasting.backtest import SelectedBacktest, choose_rules, summarize
from models.forecasting.champion import choose_champion
from models.forecasting.peak_ensemble import ENSEMBLE_NAME, ensemble_backtest, member_candidates

__all__ = ["VARIANTS", "main", "rescore", "with_ensemble"]

#: Variant name -> (planning_z, peak_n_se, direct_peak_plain) for :func:`models.forecasting.backtest.choose_rules`.
VARIANTS: dict[str, tuple[float, float, bool]] = {
    "plain": (0.0, 0.0, False),
    "peak-1se": (0.0, 1.0, False),
    "planning-ucb": (1.0, 0.0, False),
    "both": (1.0, 1.0, False),
    "direct-x1": (0.0, 0.0, True),
}


def with_ensemble(backtests: dict[str, SelectedBacktest]) -> dict[str, SelectedBacktest]:
    """``backtests`` plus a ``darts-peak-ensemble`` built from its saved members' forecasts (module doc).

    Unchanged when the ensemble is there already or a member is missing. The rules in its metrics are
    the default choice's; :func:`rescore` chooses them again anyway.
    """
    if ENSEMBLE_NAME in backtests or not all(m in backtests for m in member_candidates()):
        return backtests
    return {**backtests, ENSEMBLE_NAME: ensemble_backtest([backtests[m] for m in member_candidates()])}


def rescore(
    backtests: dict[str, SelectedBacktest], planning_z: float, peak_n_se: float, direct_peak_plain: bool = False
) -> dict[str, dict]:
    """Report metrics of every model (and ``champion``, with ``chosen``) under one variant of the rule choice."""
    out, redone = {}, {}
    for name, bt in backtests.items():
        rule, peak_rule = choose_rules(
            bt.selection, planning_z=planning_z, peak_n_se=peak_n_se, direct_peak_plain=direct_peak_plain
        )
        redone[name] = SelectedBacktest(bt.selection, bt.report, summarize(bt.report, rule=rule, peak_rule=peak_rule))
        out[name] = dict(redone[name].metrics)
    demeter = out.get("demeter-arima", {}).get("peak_mae")
    for m in out.values():
        m["vs_demeter"] = m["peak_mae"] / demeter if demeter else float("nan")
    pool = {c: redone[c] for c in CHAMPION_CANDIDATES if c in redone}
    if pool:
        choice = choose_champion(pool, planning_z=planning_z)
        out["champion"] = {**out[choice.name], "chosen": choice.name}
    return out


def main(argv: list[str] | None = None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("file", help="pickle written by benchmarks/forecasting/forecasting.py --save-backtests")
    p.add_argument("--variants", default=",".join(VARIANTS), help=f"comma-separated subset of {list(VARIANTS)}")
    p.add_argument(
        "--ensemble",
        action="store_true",
        help=f"add {ENSEMBLE_NAME} from the saved {' and '.join(member_candidates())} forecasts where it was not run",
    )
    a = p.parse_args(argv)
    with open(a.file, "rb") as fh:
        saved = pickle.load(fh)  # a file this project's benchmark wrote: trusted input
    results = {}
    for variant in a.variants.split(","):
        z, n_se, direct = VARIANTS[variant]
        print(f"\n### {variant} (planning_z={z:g}, peak_n_se={n_se:g}, direct_peak_plain={direct})\n")
        print("| trace | model | chosen | rule | peak_rule | peak MAE | / Demeter | under-forecast | over-provisioning |")
        print("|---|---|---|---|---|---|---|---|---|")
        for (workload, seed), backtests in saved.items():
            out = rescore(with_ensemble(backtests) if a.ensemble else backtests, z, n_se, direct)
            results[(variant, workload, seed)] = out
            for name, m in out.items():
                print(
                    f"| {workload} {seed} | {name} | {m.get('chosen', '')} | {m['rule']} | {m['peak_rule']} | "
                    f"{m['peak_mae']:.0f} | {m['vs_demeter']:.3f} | {100 * m['under_rate']:.1f} % | "
                    f"{m['over_provisioning']:.3f} |"
                )
    return results


if __name__ == "__main__":
    main()
