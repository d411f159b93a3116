"""The ``flinktune`` command line; its error boundary, shared with every ``python -m jobs.<name>``, is
:mod:`flinktune.entry` (one line and exit code 2 on a known error).

- :mod:`~flinktune.cli.main`: the ``flinktune`` Typer app and ``main`` (the console script);
  ``python -m flinktune.cli`` runs it too. Its commands, by concept: :mod:`~flinktune.cli.pipeline`
  (demo, decide, report, replay), :mod:`~flinktune.cli.twin`, :mod:`~flinktune.cli.local_flink`,
  :mod:`~flinktune.cli.fleet`; what they share (checked options, the state folder) is
  :mod:`~flinktune.cli.options`.
"""

__all__: list[str] = []
