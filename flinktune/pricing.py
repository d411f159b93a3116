"""What reserved resources cost: a price list for CPU core-hours and memory GiB-hours.

Use :func:`load_prices` (environment ``FLINKTUNE_PRICE_*`` over the defaults) and
:meth:`PriceList.cost` wherever "cheaper" has to be one number: the run report and the replay
table both price core-hours and GiB-hours with it. Money a month is stated only where a spread over
seeds backs it (the README's table), never by multiplying one run's hours out.

Default: AWS Fargate on-demand, Linux/x86, us-east-1 (USD 0.04048 per vCPU-hour and
USD 0.004445 per GB-hour, the public price list as of 2026). Fargate prices CPU and memory
separately, as a Flink TaskManager reserves them, so no instance-packing assumption is needed.
Set ``FLINKTUNE_PRICE_CPU_CORE_HOUR`` / ``FLINKTUNE_PRICE_MEMORY_GIB_HOUR`` /
``FLINKTUNE_PRICE_CURRENCY`` / ``FLINKTUNE_PRICE_SOURCE`` for your own contract.
"""

from __future__ import annotations

from typing import Any

from pydantic import Field, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

__all__ = ["PriceList", "load_prices"]


class PriceList(BaseSettings):
    """Prices of one reserved CPU core and one GiB of memory for one hour (read from ``FLINKTUNE_PRICE_*``)."""

    model_config = SettingsConfigDict(env_prefix="FLINKTUNE_PRICE_", extra="forbid", validate_default=True)

    cpu_core_hour: float = Field(0.04048, ge=0, description="Price of one reserved CPU core (vCPU) for one hour.")
    memory_gib_hour: float = Field(0.004445, ge=0, description="Price of one reserved GiB of memory for one hour.")
    currency: str = Field("USD", min_length=1, max_length=8, description="Currency of both prices, e.g. USD or EUR.")
    source: str = Field("AWS Fargate on-demand, Linux/x86, us-east-1", description="Where the prices come from.")

    @model_validator(mode="after")
    def _something_costs(self) -> PriceList:
        if self.cpu_core_hour == 0 and self.memory_gib_hour == 0:
            raise ValueError(
                "price list: cpu_core_hour and memory_gib_hour are both 0, so every configuration would cost nothing"
            )
        return self

    def cost(self, cpu_core_hours: Any, memory_gib_hours: Any) -> Any:
        """Money for ``cpu_core_hours`` reserved core-hours and ``memory_gib_hours`` GiB-hours.

        Floats give a float; arrays or Series of the same shape give the cost element-wise."""
        total = cpu_core_hours * self.cpu_core_hour + memory_gib_hours * self.memory_gib_hour
        return float(total) if isinstance(total, (int, float)) or getattr(total, "ndim", 1) == 0 else total

    def money(self, amount: float) -> str:
        """``amount`` in this currency, e.g. ``USD 1.23`` (two decimals; four below one cent)."""
        digits = 4 if 0 < abs(amount) < 0.01 else 2
        return f"{self.currency} {amount:,.{digits}f}"

    def describe(self) -> str:
        """One line for reports: both prices and their source."""
        return (
            f"{self.currency} {self.cpu_core_hour:g} per CPU core-hour and {self.currency} {self.memory_gib_hour:g} "
            f"per GiB-hour ({self.source})"
        )


def load_prices(**overrides: Any) -> PriceList:
    """The price list from the environment, with explicit keyword overrides taking precedence."""
    return PriceList(**overrides)
