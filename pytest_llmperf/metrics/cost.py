"""What a measurement's tokens cost, from a price per hour (`--llmperf-cost-per-hour`).

    $ per 1M tokens = the engine's USD per hour / (tokens per second x 3600 s per hour) x 1,000,000

over the measured throughput: output tokens for "$/1M out", prompt plus output tokens for
"$/1M tot" (per million, the unit API price lists use; see docs/reports.md). The throughput is the
one under the test's load, not the peak: a load that leaves the engine idle half the time costs
twice as much per token, which is what that load would cost in production.

The engine is charged its share of the price, not the whole machine's: a TP=1 engine on a machine
of 8 GPUs uses 1 of them, and the other 7 could serve 7 more engines; charging it all 8 would make
8 x TP=1 look 8 times dearer than it is beside TP=8. So a price is one of

    2.49          the whole machine's (the GPUs this session may use): an engine of n of its
                  N GPUs is charged 2.49 x n / N; on a CPU machine (no GPUs) the whole price
    2.49/gpu      one GPU's (how clouds list GPU prices): an engine of n GPUs pays 2.49 x n
    2.49/engine   one engine's, whatever it uses (a deployment priced as a whole)

where an engine's GPUs are TP x PP x DP (gpus.py). The share shows on each engine's line under
the tables, and in the run file's "cost".
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pytest_llmperf.errors import InputError
from pytest_llmperf.machine.hardware import HARDWARE_CLASSES, is_gpu_class
from pytest_llmperf.metrics import gpus

PER_OUTPUT = "usd_per_1m_output_tok"
PER_TOTAL = "usd_per_1m_total_tok"
NAMES = (PER_OUTPUT, PER_TOTAL)
SECONDS_PER_HOUR = 3600
MACHINE, GPU, ENGINE = "machine", "gpu", "engine"  # what a price is for: its "/suffix"
UNITS = (MACHINE, GPU, ENGINE)
RULE = ("expected US dollars per hour, a number above 0: the machine's (2.49), one GPU's "
        "(2.49/gpu) or one engine's (2.49/engine), or one such price per hardware class "
        f"(h100=2.49/gpu, cpu=0.10; classes: {', '.join(HARDWARE_CLASSES)})")


@dataclass(frozen=True)
class Price:
    usd_per_hour: float
    per: str = MACHINE  # one of UNITS


CostSetting = Price | dict[str, Price]


def _price(text: str) -> Price:
    """"2.49", "2.49/gpu", "2.49 / Engine"."""
    number, slash, unit = (part.strip() for part in text.partition("/"))
    unit = unit.lower() if slash else MACHINE
    try:
        usd = float(number)
    except ValueError:
        raise InputError(RULE) from None
    if not (math.isfinite(usd) and usd > 0) or unit not in UNITS:
        raise InputError(RULE)
    return Price(usd, unit)


def parse_cost_per_hour(text: str) -> CostSetting:
    """"2.49" (whatever the hardware), "2.49/gpu", "2.49/engine", or "h100=2.49/gpu, cpu=0.10"
    (a price per hardware class, so one ini file serves every runner)."""
    text = text.strip()
    if "=" not in text:
        return _price(text)
    prices: dict[str, Price] = {}
    for part in text.replace("\n", ",").split(","):
        if not part.strip():
            continue
        name, equals, value = (piece.strip() for piece in part.partition("="))
        if not equals or name.lower() not in HARDWARE_CLASSES:
            raise InputError(RULE)
        price = _price(value)
        if not is_gpu_class(name.lower()) and price.per == GPU:
            number = value.partition("/")[0].strip()
            raise InputError(f"{name}={value}: hardware class cpu has no GPUs; price the machine "
                             f"(cpu={number}) or one engine (cpu={number}/engine)")
        prices[name.lower()] = price
    if not prices:
        raise InputError(RULE)
    return prices


def _gpu_price_on_cpu(price: Price | None, hardware_class: str) -> bool:
    return price is not None and price.per == GPU and not is_gpu_class(hardware_class)


def for_hardware(setting: CostSetting | None, hardware_class: str) -> Price | None:
    """The price for this session's machine; None when none is set for its class, or the one
    price is per GPU and the machine has none (missing_note says so)."""
    price = setting.get(hardware_class) if isinstance(setting, dict) else setting
    return None if _gpu_price_on_cpu(price, hardware_class) else price


def missing_note(setting: CostSetting | None, hardware_class: str) -> str | None:
    """Why the cost columns are missing though a price was given, for the notes."""
    if isinstance(setting, dict) and hardware_class not in setting:
        return (f"no cost columns: --llmperf-cost-per-hour has no price for hardware class "
                f"{hardware_class} (it has {', '.join(setting)}); add {hardware_class}=USD")
    if isinstance(setting, Price) and _gpu_price_on_cpu(setting, hardware_class):
        return ("no cost columns: --llmperf-cost-per-hour is a price per GPU and hardware class "
                "cpu has no GPUs; give one price per class (h100=2.49/gpu, cpu=0.10)")
    return None


def as_price(value: Price | float | None) -> Price | None:
    """A report's price: a bare number is the whole machine's, as it was before prices had a
    unit."""
    if value is None or isinstance(value, Price):
        return value
    return Price(float(value))


def _usd(value: float) -> str:
    return f"{value:.4g} USD/h"


@dataclass(frozen=True)
class Share:
    """What one engine is charged per hour, and from what."""

    usd_per_hour: float
    price: Price
    engine_gpus: int
    machine_gpus: int  # 0 on a CPU machine

    def describe(self) -> str:
        """For the engine's line: "cost 0.3113 USD/h: 1 of 8 GPUs of a 2.49 USD/h machine"."""
        price, gpus = _usd(self.price.usd_per_hour), self.engine_gpus
        if self.price.per == ENGINE:
            return f"cost {price} per engine"
        if self.price.per == GPU:
            plural = "s" if gpus > 1 else ""
            return f"cost {_usd(self.usd_per_hour)}: {gpus} GPU{plural} at {price} each"
        if not self.machine_gpus:
            return f"cost {price}: the whole machine"
        return (f"cost {_usd(self.usd_per_hour)}: {min(gpus, self.machine_gpus)} of "
                f"{self.machine_gpus} GPUs of a {price} machine")

    def to_dict(self) -> dict[str, Any]:
        """The run file's "cost" of a result, less the dollars per million tokens."""
        return {"usd_per_hour": self.usd_per_hour, "price_usd_per_hour": self.price.usd_per_hour,
                "price_per": self.price.per, "engine_gpus": self.engine_gpus,
                "machine_gpus": self.machine_gpus}


def engine_share(price: Price, engine_gpus: int, machine_gpus: int) -> Share:
    """The engine's share of `price`: `engine_gpus` (TP x PP x DP) of the `machine_gpus` the
    session may use (0 on a CPU machine, which is charged whole)."""
    if price.per == ENGINE:
        usd = price.usd_per_hour
    elif price.per == GPU:
        usd = price.usd_per_hour * engine_gpus
    elif machine_gpus:
        # An engine cannot hold more GPUs than the machine has (a test that needs more is
        # skipped); a deployment's spec can say so, and is then charged the whole machine.
        usd = price.usd_per_hour * min(engine_gpus, machine_gpus) / machine_gpus
    else:
        usd = price.usd_per_hour
    return Share(usd, price, engine_gpus, machine_gpus)


def share_of(price: Price, engine: Mapping[str, Any], fingerprint: Mapping[str, Any]) -> Share:
    """engine_share for a result: its engine spec (Engine.to_dict) and machine fingerprint."""
    return engine_share(price, gpus.parallelism(engine).gpus, gpus.machine_gpus(fingerprint))


def per_million_tokens(values: Mapping[str, float | None],
                       usd_per_hour: float | None) -> dict[str, float | None]:
    """PER_OUTPUT and PER_TOTAL from a row's throughputs; None without a price or a throughput."""
    def dollars(tok_s: float | None) -> float | None:
        if usd_per_hour is None or not tok_s:
            return None
        return usd_per_hour / (tok_s * SECONDS_PER_HOUR) * 1e6

    return {PER_OUTPUT: dollars(values.get("output_throughput_tok_s")),
            PER_TOTAL: dollars(values.get("total_throughput_tok_s"))}
