"""The entry points: the ``flinktune`` command line and the error boundary every entry point uses.

- :mod:`~flinktune.cli.entry`: the error boundary of the CLI and of each ``python -m jobs.<name>``
  (one line and exit code 2 on a known error).
- :mod:`~flinktune.cli.main`: the ``flinktune`` Typer app and ``main`` (the console script);
  ``python -m flinktune.cli`` runs it too. Its commands, by concept: :mod:`~flinktune.cli.pipeline`
  (demo, decide, report, replay), :mod:`~flinktune.cli.twin`, :mod:`~flinktune.cli.local_flink`,
  :mod:`~flinktune.cli.fleet`; what they share (checked options, the state folder) is
  :mod:`~flinktune.cli.options`.

This package imports nothing itself, so a job importing :mod:`flinktune.cli.entry` does not load
the CLI's commands.
"""

__all__: list[str] = []
