"""What a rehearsal did, per job: its changes and a verdict on each, as the local-Flink loop benchmark judges them.

Use :func:`job_report` after the run: the changes are the state store's applied reconfigurations,
the samples the raw lake the Prometheus extract filled, and each change is judged by
:func:`flinktune.localflink.audit.judge_changes` (the benchmark's own judge): **correct** (latency
held after it and no capacity beyond need), **needless** (a smaller parallelism carried the peak
after it) or **late** (the latency target was missed after it: the change came too late or was
too small); ``None`` when too little time followed it to judge.

Every decision is listed with the gate that decided its outcome (:func:`decision_gate`: changed,
advice only, stale or frozen metrics, another controller, stabilizing, the scale-down budget, the
skew hold, the policy's own keep, ...), the age of the newest sample it decided on, the parallelism it
ran at and the rate its policy planned for; each change with how long the load had outgrown the old
parallelism when it was decided and how long the new one took to run (:func:`change_timing`).

The capacities it judges against are measured in the run itself, from the lake: for each
parallelism that ran, the median over steady samples of throughput / (widest vertex busy
fraction); a parallelism that never ran gets the measured one scaled linearly (stated as such).
"""

from __future__ import annotations

import json
import time
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from flinktune.localflink.audit import Change, judge_changes

__all__ = [
    "GATES",
    "change_timing",
    "change_verdict",
    "decision_gate",
    "job_report",
    "measured_capacities",
    "render_markdown",
    "write_report",
]

#: What a decision's outcome came from, by the start (or a phrase) of its reason: the guard's and the
#: loop's wording (flinktune.decision.guard, flinktune.decision.loop), first match wins.
GATES: tuple[tuple[str, str], ...] = (
    ("hold: FlinkDeployment", "another controller"),
    ("stale data", "stale metrics"),
    ("frozen metrics", "frozen metrics"),
    ("model store unreachable", "model store"),
    ("cannot read the job's configuration", "cluster unreadable"),
    ("hold: ", "data problems"),
    ("stabilizing:", "stabilization window"),
    ("scale-down deferred:", "scale-down budget"),
    ("refused: ", "space or quota"),
    ("scaling does not help", "skew hold"),
    ("already in force", "already in force"),
    ("reconciled:", "reconciled"),
)


def measured_capacities(raw: pd.DataFrame, parallelisms: tuple[int, ...]) -> tuple[dict[int, float], str]:
    """Capacity per parallelism from the run's own samples (module docstring) and how it was had."""
    par = raw[raw["metric"] == "configParallelism"].groupby("ts_ms")["value"].max()
    busy = raw[raw["metric"] == "busyTimeMsPerSecond"].groupby(["ts_ms", "vertex"])["value"].mean().groupby("ts_ms").max()
    rin = raw[raw["metric"] == "numRecordsInPerSecond"].groupby(["ts_ms", "vertex"])["value"].sum().groupby("ts_ms").max()
    df = pd.concat({"p": par, "busy": busy, "rin": rin}, axis=1).dropna()
    df = df[(df["busy"] > 100) & (df["busy"] <= 1000) & (df["rin"] > 0)]
    cap = {int(p): float(np.median(g["rin"] / (g["busy"] / 1000.0))) for p, g in df.groupby("p") if len(g) >= 5}
    how = f"measured at p={sorted(cap)}"
    if cap:
        per = max(cap.values()) / max(cap, key=lambda p: cap[p])
        for p in parallelisms:
            if p not in cap:
                cap[p] = per * p
                how += f", p={p} scaled linearly"
    return cap, how


def decision_gate(row: Any) -> str:
    """Which gate decided a stored decision's outcome (a ``decisions`` row: action, status, reason, dry_run)."""
    action, status, reason = str(row["action"]), str(row.get("status") or ""), str(row["reason"] or "")
    if action == "reconfigure" and status == "applied":
        return "changed"
    if status in ("failed", "rolled-back"):
        return f"apply {status}"
    if int(row.get("dry_run") or 0) and action in ("reconfigure", "profile"):
        return "advice only"
    for phrase, gate in GATES:
        if phrase in reason:
            return gate
    if action == "profile":
        return "profiling"
    return "policy: no change needed" if action == "keep" else f"{action} ({status or 'recorded'})"


def _stored(row: Any, column: str, *path: str) -> float | None:
    """A number inside a decision row's JSON column (``state``: ``data_age_s``; ``inputs``: ``planned_rate``), else None."""
    try:
        value: Any = json.loads(row[column]) if isinstance(row.get(column), str) else None
        for key in path:
            value = value.get(key) if isinstance(value, dict) else None
    except ValueError:
        return None
    return float(value) if isinstance(value, (int, float)) and np.isfinite(value) else None


def change_timing(
    raw: pd.DataFrame, change: Change, capacity: dict[int, float], *, reach_s: float = 10.0
) -> dict[str, float | None]:
    """When a change came against the load and when it took effect, from the run's samples (s):

    - ``due_for_s``: for a scale-up, how long the offered rate had been over the old parallelism's
      capacity when the change was decided (0 when it was not yet over: the change came ahead of it);
    - ``in_force_after_s``: from the decision to the first sample at the new parallelism.

    None where the samples cannot say (no capacity of the old parallelism, no sample at the new one, none
    within ``reach_s`` before the decision while the old parallelism still carried the load)."""
    ts_ms = change.ts * 1000.0
    rate = raw[raw["metric"] == "workloadRate"].groupby("ts_ms")["value"].max()  # the offered rate as the judge reads it
    par = raw[raw["metric"] == "configParallelism"].groupby("ts_ms")["value"].max()
    due: float | None = None
    before = rate[rate.index <= ts_ms]
    old_capacity = capacity.get(change.from_p)
    if change.to_p > change.from_p and old_capacity and len(before):
        carried = before.index[before <= old_capacity]  # samples the old parallelism still carried
        if len(carried) and carried[-1] < before.index[-1]:
            due = (ts_ms - float(carried[-1])) / 1000.0
        elif len(carried) and ts_ms - float(carried[-1]) <= reach_s * 1000.0:  # still carried just before the decision
            due = 0.0
    at_new = par[(par.index >= ts_ms) & (par == change.to_p)]
    return {"due_for_s": due, "in_force_after_s": (float(at_new.index[0]) - ts_ms) / 1000.0 if len(at_new) else None}


def change_verdict(correct: bool | None, latency_ok: bool | None, needless: bool | None) -> str:
    """correct / needless / late, or ``not judged``."""
    if correct is None:
        return "not judged"
    if correct:
        return "correct"
    return "needless" if needless else "late"


def job_report(
    job: str,
    decisions: pd.DataFrame,
    raw: pd.DataFrame,
    *,
    latency_target_ms: float,
    end_ts: float,
    parallelisms: tuple[int, ...] = (1, 2),
) -> dict[str, Any]:
    """The job's decisions, changes with verdicts, latency against target, downtime and cost against static."""
    applied = decisions[(decisions["action"] == "reconfigure") & (decisions["status"] == "applied")]
    changes: list[Change] = []
    for _, row in applied.iterrows():
        state = json.loads(row["state"]) if isinstance(row["state"], str) else {}
        target = json.loads(row["target"]) if isinstance(row["target"], str) else {}
        before = int((state.get("config") or {}).get("parallelism", 0)) or (changes[-1].to_p if changes else 1)
        changes.append(
            Change(
                float(row["ts"]),
                before,
                int(target.get("parallelism", 0)),
                str(row["mode"] or ""),
                float(row["downtime_s"] or 0.0),
                str(row["reason"]),
            )
        )
    cap, how = measured_capacities(raw, parallelisms) if len(raw) else ({}, "no samples")
    verdicts: list[dict[str, Any]] = []
    problem = ""
    if changes:
        try:
            for v in judge_changes(raw, changes, cap, latency_target_ms, end_ts):
                verdict = change_verdict(v.correct, v.latency_ok, v.needless)
                verdicts.append({**v.to_dict(), "verdict": verdict, **change_timing(raw, v.change, cap)})
        except ValueError as exc:  # no capacity or no latency samples: say so instead of a verdict
            problem = str(exc)
            verdicts = [{"change": vars(c), "verdict": "not judged", "why": problem} for c in changes]
    per_decision: list[dict[str, Any]] = [
        {
            "ts": float(row["ts"]),
            "action": str(row["action"]),
            "gate": decision_gate(row),
            "data_age_s": _stored(row, "state", "data_age_s"),
            "parallelism": _stored(row, "state", "config", "parallelism"),
            "planned_rate": _stored(row, "inputs", "planned_rate"),
            "reason": str(row["reason"]),
        }
        for _, row in decisions.iterrows()
    ]
    ages = [float(d["data_age_s"]) for d in per_decision if d["data_age_s"] is not None]
    gaps = np.diff(sorted(d["ts"] for d in per_decision))  # how often the job was decided: the decide cadence it got
    lat = raw.loc[raw["metric"] == "latencyP95Ms", "value"] if len(raw) else pd.Series(dtype=float)
    par = raw[raw["metric"] == "configParallelism"].groupby("ts_ms")["value"].max() if len(raw) else pd.Series(dtype=float)
    top = max(parallelisms)
    return {
        "job": job,
        "decisions": len(decisions),
        "decisions_with_reason": int((decisions["reason"].fillna("").str.len() > 0).sum()) if len(decisions) else 0,
        "actions": decisions["action"].value_counts().to_dict() if len(decisions) else {},
        "last_reasons": decisions["reason"].tail(3).tolist() if len(decisions) else [],
        "changes": verdicts,
        "per_decision": per_decision,
        "gates": dict(Counter(str(d["gate"]) for d in per_decision).most_common()),
        "data_age_s_median": float(np.median(ages)) if ages else None,
        "decision_gap_s_median": float(np.median(gaps)) if len(gaps) else None,
        "decision_gap_s_max": float(gaps.max()) if len(gaps) else None,
        "judge_problem": problem,
        "capacity": cap,
        "capacity_source": how,
        "raw_rows": int(len(raw)),
        "latency_p95_ms_median": float(lat.median()) if len(lat) else None,
        "latency_over_target_fraction": float((lat > latency_target_ms).mean()) if len(lat) else None,
        "downtime_s_total": float(sum(c.downtime_s for c in changes)),
        # Slot-seconds used against a static deployment at the largest parallelism over the same samples.
        "cost_vs_static_max": float(par.mean() / top) if len(par) else None,
    }


def _num(value: Any, fmt: str = "{:,.0f}") -> str:
    return "n/a" if value is None or (isinstance(value, float) and not np.isfinite(value)) else fmt.format(value)


def render_markdown(summary: dict[str, Any]) -> str:
    """The run's summary as Markdown: per job the decisions, each change with its verdict, latency
    against target, downtime and cost against static; then the tasks each part ran."""
    target = summary.get("latency_target_ms")
    lines = [
        f"Rate plan {summary.get('minutes')} min, policy `{summary.get('policy')}`, p95 latency target "
        f"{_num(target)} ms, schedules {summary.get('schedules')}; stack ready after {summary.get('stack_ready_s')} s, "
        f"whole run {summary.get('wall_s')} s; left running after the stop: {summary.get('left_running') or 'nothing'}.",
        "",
    ]
    for name, job in summary.get("jobs", {}).items():
        plan = job.get("rate_plan", {})
        lines += [
            f"### {name}",
            "",
            f"- offered rate {_num(plan.get('low'))} -> {_num(plan.get('high'))} -> {_num(plan.get('low'))} rec/s; "
            f"capacity judged against: {job['capacity_source']} "
            f"({', '.join(f'p={p}: {_num(c)} rec/s' for p, c in sorted(job['capacity'].items())) or 'none'})",
            f"- {job['decisions']} decisions ({job['actions']}), all with a reason: "
            f"{job['decisions_with_reason'] == job['decisions']}",
            f"- p95 latency median {_num(job['latency_p95_ms_median'])} ms, over target in "
            f"{_num(job['latency_over_target_fraction'], '{:.0%}')} of samples",
            f"- downtime of all changes {_num(job['downtime_s_total'], '{:.1f}')} s; slots used against a static "
            f"deployment at the largest parallelism: {_num(job['cost_vs_static_max'], '{:.0%}')}",
            "",
        ]
        if job.get("per_decision"):
            lines += [
                f"- gates: {', '.join(f'{gate} {n}' for gate, n in job['gates'].items())}; data age at decision: median {_num(job['data_age_s_median'], '{:.0f}')} s; "
                f"decided every {_num(job.get('decision_gap_s_median'))} s (median; longest gap "
                f"{_num(job.get('decision_gap_s_max'))} s)",
                "",
                "| when (UTC) | action | gate | data age s | p | planned rec/s | reason |",
                "|---|---|---|---|---|---|---|",
            ]
            for d in job["per_decision"]:
                when = time.strftime("%H:%M:%S", time.gmtime(d["ts"]))
                reason = d["reason"].replace("|", "/")[:160]
                lines.append(
                    f"| {when} | {d['action']} | {d['gate']} | {_num(d['data_age_s'])} | {_num(d.get('parallelism'))} "
                    f"| {_num(d.get('planned_rate'))} | {reason} |"
                )
            lines.append("")
        if job["changes"]:
            lines += [
                "| when (UTC) | change | load over the old capacity for s | new p running after s | mode | downtime s "
                "| verdict | why |",
                "|---|---|---|---|---|---|---|---|",
            ]
            for v in job["changes"]:
                c = v["change"]
                when = time.strftime("%H:%M:%S", time.gmtime(float(c["ts"])))
                lines.append(
                    f"| {when} | p={c['from_p']} -> p={c['to_p']} | {_num(v.get('due_for_s'))} "
                    f"| {_num(v.get('in_force_after_s'))} | {c['mode']} | {_num(c['downtime_s'], '{:.1f}')} "
                    f"| **{v['verdict']}** | {v.get('why', '')} |"
                )
            lines.append("")
        else:
            lines += [f"No change. Last reasons: {job['last_reasons'][-1:] or 'none'}", ""]
    lines += [
        f"Celery workers' finished workloads: {summary.get('celery_workers_ran')}; task instances by state: "
        f"{summary.get('tasks', {}).get('by_dag')}; median task duration, s: {summary.get('tasks', {}).get('duration_s_median')}",
        "",
    ]
    return "\n".join(lines)


def write_report(out: Path, summary: dict[str, Any]) -> Path:
    """``<out>/rehearsal.json`` and ``<out>/rehearsal.md`` (:func:`render_markdown`); returns the JSON's path."""
    out.mkdir(parents=True, exist_ok=True)
    path = out / "rehearsal.json"
    path.write_text(json.dumps(summary, indent=2, default=str))
    try:
        (out / "rehearsal.md").write_text(render_markdown(summary))
    except (KeyError, TypeError, ValueError) as exc:  # a run stopped early has no per-job part: the JSON says what there is
        (out / "rehearsal.md").write_text(f"No report: the run ended before its outcomes were collected ({exc!r}).\n")
    return path
