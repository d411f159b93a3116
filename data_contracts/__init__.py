"""Data contracts: one YAML per dataset (``contracts/*.yaml``), compiled into Great Expectations
suites, checked by :func:`validate` on pandas or Spark DataFrames.

Use ``validate(df, "features_1m", batch_id=..., quarantine_root=...)`` at each lake boundary; it
returns a :class:`ValidationOutcome` or quarantines the batch and raises :class:`ContractViolation`.
Given ``gx_project=<folder>`` the GX rules run as that project's Checkpoints and publish GX
Data Docs (:class:`GxProject`), and each batch is logged (:func:`read_batches`).
This package imports nothing of flinktune (contracts are shared by every producer).
"""

from data_contracts.batch_log import BatchRecord, read_batches
from data_contracts.contract import Contract, ContractError, load_contract
from data_contracts.gx_project import GxProject
from data_contracts.outcome import ContractViolation, Failure, ValidationOutcome
from data_contracts.validate import run_checks, validate

__all__ = [
    "BatchRecord",
    "Contract",
    "ContractError",
    "ContractViolation",
    "Failure",
    "GxProject",
    "ValidationOutcome",
    "load_contract",
    "read_batches",
    "run_checks",
    "validate",
]
