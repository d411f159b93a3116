"""The run report of one job: a verdict per goal, the same load under other policies, money, plots.

Use :func:`write_report` with :class:`ReportInputs` (``assemble`` builds them from the lake,
the state store and, on the twin, :func:`same_load_from_twin` + :func:`compare_on_same_load`).
Modules: ``assemble`` (one job's report, end to end), ``period`` (inputs, period figures, events),
``counterfactual`` (replays on the same load), ``replays`` (their pool and on-disk cache),
``spread`` (figures over seeds, money per month), ``verdict`` (met / missed per goal), ``wording``
(plain words), ``content`` (what the report says), ``plots`` / ``interactive`` (PNG and Plotly
figures), ``render`` (Jinja2 templates), ``writer`` (the atomic folder), ``tracking`` (MLflow).
"""

from flinktune.report.counterfactual import COUNTERFACTUAL_POLICIES, Comparison, compare_on_same_load, same_load_from_twin
from flinktune.report.period import ReportInputs, summarise
from flinktune.report.verdict import Goals, Verdict, judge
from flinktune.report.writer import write_report

__all__ = [
    "COUNTERFACTUAL_POLICIES",
    "Comparison",
    "Goals",
    "ReportInputs",
    "Verdict",
    "compare_on_same_load",
    "judge",
    "same_load_from_twin",
    "summarise",
    "write_report",
]
