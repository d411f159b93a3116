"""The verdict at the top of a report: met or missed, per goal, in plain words.

Use :func:`judge` on a :class:`flinktune.report.counterfactual.Comparison` (the run beside static
on the same load) and :func:`judge_alone` when there is no counterfactual (a real cluster). Goals
(:class:`Goals`, from ``FLINKTUNE_GOAL_*``):

- latency: the user's own target, absolute: p95 (:data:`flinktune.report.latency.P95_DEFINITION`) at
  most the target, and the minutes over it within the error budget; static's figures on the same
  load are stated beside, not judged against;
- recovery limit: no more recoveries over the limit than static on the same failures;
- cost: cheaper than static, priced by the price list.
"""

from __future__ import annotations

from dataclasses import dataclass

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

from flinktune.pricing import PriceList
from flinktune.report.counterfactual import Comparison

__all__ = ["GoalCheck", "Goals", "Verdict", "judge", "judge_alone"]


class Goals(BaseSettings):
    """The latency objective the verdict holds a run to, besides its target (``FLINKTUNE_LATENCY_TARGET_MS``)."""

    model_config = SettingsConfigDict(env_prefix="FLINKTUNE_GOAL_", extra="forbid", validate_default=True)

    error_budget: float = Field(
        0.05,
        ge=0,
        le=1,
        description="Share of a period's minutes whose p95 may be over the latency target (the SLO's error budget).",
    )


@dataclass(frozen=True)
class GoalCheck:
    """One goal: ``met`` (None when it could not be judged) and the sentence that says why."""

    goal: str
    met: bool | None
    sentence: str

    @property
    def word(self) -> str:
        return {True: "met", False: "missed", None: "not judged"}[self.met]


@dataclass(frozen=True)
class Verdict:
    """Every goal's check and one headline for the demo's last line and the report's top."""

    policy: str
    checks: tuple[GoalCheck, ...]
    basis: str

    @property
    def met(self) -> bool:
        """True when every goal that could be judged was met."""
        return all(c.met is not False for c in self.checks)

    def headline(self) -> str:
        missed = [c.goal for c in self.checks if c.met is False]
        judged = [c for c in self.checks if c.met is not None]
        parts = ", ".join(f"{c.goal} {c.word}" for c in self.checks)
        if missed:
            return f"{self.policy} MISSED {len(missed)} of {len(judged)} goals ({parts}) {self.basis}"
        return f"{self.policy} met all {len(judged)} goals it could be judged on ({parts}) {self.basis}"

    def to_dict(self) -> dict[str, object]:
        return {
            "met": self.met,
            "headline": self.headline(),
            "basis": self.basis,
            "checks": [{"goal": c.goal, "met": c.met, "sentence": c.sentence} for c in self.checks],
        }


def _ms(v: float) -> str:
    return f"{v / 1000:,.1f} s" if v >= 10_000 else f"{v:,.0f} ms"


def judge(comparison: Comparison, goals: Goals | None = None, reference: str = "static") -> Verdict:
    """Met or missed per goal for the run against ``reference`` (static) on the same load."""
    goals = goals or Goals()
    if reference not in comparison.outcomes:
        raise ValueError(f"verdict: the reference policy {reference!r} was not replayed (have {sorted(comparison.outcomes)})")
    run, ref = comparison.run.measures, comparison.outcomes[reference].measures
    hours, target, limit, prices = comparison.hours, comparison.latency_target_ms, comparison.recovery_limit_s, comparison.prices
    latency = _latency_check(run["latency_p95_ms"], run["minutes_over_target"], hours, target, goals)
    latency = GoalCheck(
        latency.goal,
        latency.met,
        f"{latency.sentence[:-1]}; static on the same load: p95 {_ms(ref['latency_p95_ms'])}, "
        f"{ref['minutes_over_target']:.0f} minutes over.",
    )
    slow, ref_slow = run["recoveries_over_limit"], ref["recoveries_over_limit"]
    recovery = GoalCheck(
        "recovery limit",
        slow <= ref_slow,
        (
            f"{slow:.0f} of {run['failures']:.0f} recoveries took longer than {limit:.0f} s (static: {ref_slow:.0f} of "
            f"{ref['failures']:.0f}); the slowest took {run['recovery_max_s']:.0f} s."
        ),
    )
    cost = _cost_check(run["priced_cost"], ref["priced_cost"], hours, prices, "static")
    profiling = prices.cost(run["profiling_cpu_core_hours"], run["profiling_memory_gib_hours"])
    if profiling > 0:  # a one-time start-up profiling inflates a short period's rate: say how much of it that is
        cost = GoalCheck(
            cost.goal,
            cost.met,
            f"{cost.sentence[:-1]}; {prices.money(profiling)} of the run's cost is its "
            f"{run['profiling_runs']:.0f} profiling runs.",
        )
    basis = f"on the {_ms(target)} p95 target, recovery and cost against static on the same {hours:.1f} h of load"
    return Verdict(comparison.run.policy, (latency, recovery, cost), basis)


def _latency_check(p95_ms: float, minutes_over: float, hours: float, target_ms: float, goals: Goals) -> GoalCheck:
    """The user's absolute objective: p95 at most the target, minutes over it within the error budget."""
    budget = goals.error_budget * hours * 60.0
    p95_ok, minutes_ok = p95_ms <= target_ms, minutes_over <= budget
    return GoalCheck(
        "latency",
        p95_ok and minutes_ok,
        (
            f"p95 latency was {_ms(p95_ms)} against the {_ms(target_ms)} target{'' if p95_ok else ': over it'}, and "
            f"{minutes_over:.0f} of {hours * 60:.0f} minutes were over the target (the error budget allows "
            f"{budget:.3g}, {goals.error_budget:.0%}{'' if minutes_ok else ': too many'})."
        ),
    )


def _cost_check(cost: float, ref_cost: float, hours: float, prices: PriceList, ref_name: str) -> GoalCheck:
    # One run's hours say nothing about a month: no extrapolation without a spread over seeds.
    saved = ref_cost - cost
    if abs(saved) < 0.005:
        rate = "the same money: nothing saved"
    elif saved > 0:
        rate = f"saving {prices.money(saved)} over these hours"
    else:
        rate = f"costing {prices.money(-saved)} more over these hours"
    return GoalCheck(
        "cost",
        cost < ref_cost,
        (
            f"{prices.money(cost)} against {ref_name}'s {prices.money(ref_cost)} for the same {hours:.1f} h "
            f"({cost / ref_cost if ref_cost else float('nan'):.2f} x), {rate}."
        ),
    )


def judge_alone(
    policy: str,
    tuned: dict[str, float],
    *,
    static_cpu: float,
    static_memory_gib: float,
    latency_target_ms: float,
    prices: PriceList,
    goals: Goals | None = None,
) -> Verdict:
    """Without a counterfactual: latency against the target itself, cost against static's fixed reservation.

    ``tuned``: :func:`flinktune.report.period.summarise` of the tuned period; ``static_cpu`` /
    ``static_memory_gib``: the static maximum's total reservation. Recovery is not judged."""
    goals = goals or Goals()
    hours = tuned["hours"]
    latency = _latency_check(tuned["latency_p95_ms"], tuned["minutes_over_target"], hours, latency_target_ms, goals)
    latency = GoalCheck(latency.goal, latency.met, f"{latency.sentence[:-1]}; no counterfactual on the same load.")
    recovery = GoalCheck("recovery limit", None, "not judged: recovery times need the per-second lag of a counterfactual run.")
    ref_cost = prices.cost(static_cpu * hours, static_memory_gib * hours)
    cost = _cost_check(
        prices.cost(tuned["cpu_core_hours"], tuned["memory_gib_hours"]), ref_cost, hours, prices, "static's reservation"
    )
    basis = f"on the {_ms(latency_target_ms)} p95 target over {hours:.1f} h, without a counterfactual on the same load"
    return Verdict(policy, (latency, recovery, cost), basis)
