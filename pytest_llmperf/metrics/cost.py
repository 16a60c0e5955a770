"""What a measurement's tokens cost, from what the machine costs per hour
(`--llmperf-cost-per-hour`).

    $ per 1M tokens = USD per hour / (tokens per second x 3600 s per hour) x 1,000,000

over the measured throughput: output tokens for "$/1M out", prompt plus output tokens for
"$/1M tot" (per million, the unit API price lists use; see docs/reports.md). The price is that of
the whole machine the engine runs on (all its GPUs), and the throughput is the one under the
test's load, not the peak: a load that leaves the machine idle half the time costs twice as much
per token, which is what that load would cost in production.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from pytest_llmperf.errors import InputError
from pytest_llmperf.hardware import HARDWARE_CLASSES

PER_OUTPUT = "usd_per_1m_output_tok"
PER_TOTAL = "usd_per_1m_total_tok"
NAMES = (PER_OUTPUT, PER_TOTAL)
SECONDS_PER_HOUR = 3600
RULE = ("expected what the machine costs in US dollars per hour, a number above 0 (2.49), or one "
        f"per hardware class (h100=2.49, cpu=0.10; classes: {', '.join(HARDWARE_CLASSES)})")

CostSetting = float | dict[str, float]


def _price(text: str) -> float:
    try:
        price = float(text)
    except ValueError:
        raise InputError(RULE) from None
    if not (math.isfinite(price) and price > 0):
        raise InputError(RULE)
    return price


def parse_cost_per_hour(text: str) -> CostSetting:
    """"2.49" (whatever the hardware) or "h100=2.49, h200=3.50" (a price per hardware class, so
    one ini file serves every runner)."""
    text = text.strip()
    if "=" not in text:
        return _price(text)
    prices: dict[str, float] = {}
    for part in text.replace("\n", ",").split(","):
        if not part.strip():
            continue
        name, equals, value = (piece.strip() for piece in part.partition("="))
        if not equals or name.lower() not in HARDWARE_CLASSES:
            raise InputError(RULE)
        prices[name.lower()] = _price(value)
    if not prices:
        raise InputError(RULE)
    return prices


def for_hardware(setting: CostSetting | None, hardware_class: str) -> float | None:
    """The price of this session's machine; None when none is set for its class."""
    if isinstance(setting, dict):
        return setting.get(hardware_class)
    return setting


def missing_note(setting: CostSetting | None, hardware_class: str) -> str | None:
    """Why the cost columns are missing though a price list was given, for the notes."""
    if isinstance(setting, dict) and hardware_class not in setting:
        return (f"no cost columns: --llmperf-cost-per-hour has no price for hardware class "
                f"{hardware_class} (it has {', '.join(setting)}); add {hardware_class}=USD")
    return None


def per_million_tokens(values: Mapping[str, float | None],
                       usd_per_hour: float | None) -> dict[str, float | None]:
    """PER_OUTPUT and PER_TOTAL from a row's throughputs; None without a price or a throughput."""
    def dollars(tok_s: float | None) -> float | None:
        if usd_per_hour is None or not tok_s:
            return None
        return usd_per_hour / (tok_s * SECONDS_PER_HOUR) * 1e6

    return {PER_OUTPUT: dollars(values.get("output_throughput_tok_s")),
            PER_TOTAL: dollars(values.get("total_throughput_tok_s"))}
