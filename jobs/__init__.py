"""Runnable units (``python -m jobs.<name>``): thin entry points over the libraries.

Each module has ``run(*, ..., settings=None) -> dict`` (a JSON-serialisable summary, used as
Airflow XCom) and ``main(argv=None)``.
"""

__all__: list[str] = []
