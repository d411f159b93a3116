"""Runnable units (``python -m jobs.<name>``): thin entry points that parse, call and print.

Each module has ``run(*, ..., settings=None) -> dict`` (a JSON-serialisable summary; for the bigger
jobs the :mod:`flinktune.runs` function the DAG tasks and the CLI call too) and ``main(argv=None)``.
"""

__all__: list[str] = []
