"""The verdict at the top of a report: met or missed, per goal, in plain words.

Use :func:`judge` on a :class:`flinktune.report.counterfactual.Comparison` (the run beside static
on the same load) and :func:`judge_alone` when there is no counterfactual (a real cluster). Goals
(:class:`Goals`, from ``FLINKTUNE_GOAL_*``):

- latency: p95 at most ``p95_vs_static`` x static's on the same load, and no more minutes over the
  target than static's plus ``extra_minutes_per_hour`` per hour;
- recovery limit: no more recoveries over the limit than static on the same failures;
- cost: cheaper than static, priced by the price list.
"""

from __future__ import annotations

from dataclasses import dataclass

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

from flinktune.pricing import PriceList, savings
from flinktune.report.counterfactual import Comparison

__all__ = ["GoalCheck", "Goals", "Verdict", "judge", "judge_alone"]


class Goals(BaseSettings):
    """How much worse than static the tuner may be on latency while it saves money."""

    model_config = SettingsConfigDict(
        env_prefix="FLINKTUNE_GOAL_", extra="forbid", validate_default=True, env_ignore_empty=True, allow_inf_nan=False
    )

    p95_vs_static: float = Field(1.5, ge=1.0, description="p95 latency may be at most this many times static's on the same load.")
    extra_minutes_per_hour: float = Field(
        2.0, ge=0, description="Minutes over the latency target allowed beyond static's, per hour of the period."
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
    ratio = run["latency_p95_ms"] / ref["latency_p95_ms"] if ref["latency_p95_ms"] else float("inf")
    allowed = ref["minutes_over_target"] + goals.extra_minutes_per_hour * hours
    p95_ok, minutes_ok = ratio <= goals.p95_vs_static, run["minutes_over_target"] <= allowed
    latency = GoalCheck(
        "latency",
        p95_ok and minutes_ok,
        (
            f"p95 latency was {_ms(run['latency_p95_ms'])} against static's {_ms(ref['latency_p95_ms'])} on the same load "
            f"({ratio:.2f} x; the goal allows {goals.p95_vs_static:g} x{'' if p95_ok else ': too slow'}), and "
            f"{run['minutes_over_target']:.0f} minutes were over the {_ms(target)} target against static's "
            f"{ref['minutes_over_target']:.0f} (the goal allows {allowed:.0f}{'' if minutes_ok else ': too many'})."
        ),
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
    return Verdict(comparison.run.policy, (latency, recovery, cost), f"against static on the same {hours:.1f} h of load")


def _cost_check(cost: float, ref_cost: float, hours: float, prices: PriceList, ref_name: str) -> GoalCheck:
    s = savings(cost, ref_cost, hours)
    if abs(s.per_month) < 0.005:
        rate = "the same money: nothing saved"
    elif s.saved > 0:
        rate = f"saving {prices.money(s.per_day)} per day, {prices.money(s.per_month)} per month at this rate"
    else:
        rate = f"costing {prices.money(-s.per_day)} more per day, {prices.money(-s.per_month)} per month at this rate"
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
    allowed = goals.extra_minutes_per_hour * hours
    ok = tuned["latency_p95_ms"] <= latency_target_ms and tuned["minutes_over_target"] <= allowed
    latency = GoalCheck(
        "latency",
        ok,
        (
            f"p95 latency was {_ms(tuned['latency_p95_ms'])} against the {_ms(latency_target_ms)} target, and "
            f"{tuned['minutes_over_target']:.0f} minutes were over it (allowed {allowed:.0f}); no counterfactual on the same "
            "load, so this is judged against the target itself."
        ),
    )
    recovery = GoalCheck("recovery limit", None, "not judged: recovery times need the per-second lag of a counterfactual run.")
    ref_cost = prices.cost(static_cpu * hours, static_memory_gib * hours)
    cost = _cost_check(
        prices.cost(tuned["cpu_core_hours"], tuned["memory_gib_hours"]), ref_cost, hours, prices, "static's reservation"
    )
    return Verdict(policy, (latency, recovery, cost), f"over {hours:.1f} h, without a counterfactual on the same load")
