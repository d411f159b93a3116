"""Learned models: workload forecasting (darts) and configuration surrogates (BoTorch).

Knows arrays and series, not Flink: callers turn configurations into feature arrays.
"""

__all__: list[str] = []
