"""``python -m flinktune.cli``: the ``flinktune`` command line."""

from flinktune.cli.main import main

__all__: list[str] = []

main()
