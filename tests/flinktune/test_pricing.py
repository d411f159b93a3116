"""The price list: defaults, environment overrides, bad prices named."""

import pytest
from pydantic import ValidationError

from flinktune.pricing import PriceList, load_prices
from flinktune.settings import load_settings


def test_default_prices_are_the_documented_on_demand_list():
    p = PriceList()
    assert (p.cpu_core_hour, p.memory_gib_hour, p.currency) == (0.04048, 0.004445, "USD")
    # the static maximum, 24 TaskManagers x (1 CPU, 4 GiB), for one hour
    assert p.cost(24, 96) == pytest.approx(24 * 0.04048 + 96 * 0.004445)
    assert "Fargate" in p.describe() and p.money(1.5) == "USD 1.50" and p.money(0.001) == "USD 0.0010"


def test_prices_come_from_the_environment_and_do_not_upset_the_main_settings(monkeypatch):
    monkeypatch.setenv("FLINKTUNE_PRICE_CPU_CORE_HOUR", "0.1")
    monkeypatch.setenv("FLINKTUNE_PRICE_CURRENCY", "EUR")
    p = load_prices()
    assert p.cpu_core_hour == 0.1 and p.currency == "EUR" and p.memory_gib_hour == 0.004445
    assert load_settings().latency_target_ms > 0  # FLINKTUNE_PRICE_* is not an unknown main setting


def test_bad_prices_are_named():
    with pytest.raises(ValidationError, match="cpu_core_hour"):
        PriceList(cpu_core_hour=-1)
    with pytest.raises(ValidationError, match="both 0"):
        PriceList(cpu_core_hour=0, memory_gib_hour=0)
