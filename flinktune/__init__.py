"""flinktune: keeps Flink jobs near their cheapest configuration that meets latency and recovery goals.

The domain core: configuration space, settings, the twin, policies, the decision loop, adapters,
reports and the CLI. Learned models live in the top-level ``models`` package, data contracts in
``data_contracts`` and the runnable job entry points in ``jobs``.
"""

__all__ = ["__version__"]

__version__ = "0.1.0"
