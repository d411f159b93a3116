"""The replay benchmark: every policy on the same trace, seed and failures, relative to static.

Use :func:`cli_replay` (what ``flinktune replay`` calls) or :func:`run_replay` +
:func:`write_results`; :func:`replay_policy` replays one policy. See docs/DESIGN.md section 7.
"""

from flinktune.replay.harness import DECISION_INTERVAL_S, PolicyRun, ReplaySettings, replay_policy
from flinktune.replay.metrics import RELATIVE_COLUMNS, SUMMARY_COLUMNS, relative_table, summarize
from flinktune.replay.output import markdown_table, write_results
from flinktune.replay.runner import cli_replay, load_replay_trace, resolve_policies, run_replay

__all__ = [
    "DECISION_INTERVAL_S",
    "RELATIVE_COLUMNS",
    "SUMMARY_COLUMNS",
    "PolicyRun",
    "ReplaySettings",
    "cli_replay",
    "load_replay_trace",
    "markdown_table",
    "relative_table",
    "replay_policy",
    "resolve_policies",
    "run_replay",
    "summarize",
    "write_results",
]
