"""Data contracts: one YAML per dataset (``contracts/*.yaml``), compiled into Great Expectations
suites, checked by :func:`validate` on pandas or Spark DataFrames.

Use ``validate(df, "features_1m", batch_id=..., quarantine_root=...)`` at each lake boundary; it
returns a :class:`ValidationOutcome` or quarantines the batch and raises :class:`ContractViolation`.
This package imports nothing of flinktune (contracts are shared by every producer).
"""

from data_contracts.contract import Contract, ContractError, load_contract
from data_contracts.outcome import ContractViolation, Failure, ValidationOutcome
from data_contracts.validate import run_checks, validate

__all__ = [
    "Contract",
    "ContractError",
    "ContractViolation",
    "Failure",
    "ValidationOutcome",
    "load_contract",
    "run_checks",
    "validate",
]
