"""NVML as the GPU watch calls it, answering for cards a test describes (this machine has no GPU;
the calls, constants and errors are nvidia-ml-py's), and the H200 of
tests/unit/data/h200_gpu_watch.json as such a card."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from types import SimpleNamespace

from tests.conftest import REPO

H200 = json.loads((REPO / "tests" / "unit" / "data" / "h200_gpu_watch.json").read_text())


@dataclass
class Card:
    """What one card answers; a test changes it between samples as the card would change."""

    sm_mhz: float = 1980.0
    memory_mhz: float = 2619.0
    max_sm_mhz: float = 1980.0
    utilization: int = 95
    reasons: int = 0
    pids: tuple[int, ...] = (101,)
    temperature_c: float = 50.0
    power_w: float = 600.0
    # The energy counter (mJ since the driver loaded); None: it follows the clock at power_w,
    # as a card drawing a constant power counts
    energy_mj: float | None = None
    power_limit_w: float = 700.0
    default_power_limit_w: float = 700.0
    # nvmlClockType_t -> (application clock, its default), MHz
    application_clocks: dict[int, tuple[float, float]] = field(
        default_factory=lambda: {1: (1980.0, 1980.0), 2: (2619.0, 2619.0)})
    uncorrected_ecc: int = 0
    violation_ns: dict[int, int] = field(default_factory=dict)  # perf policy -> ns so far
    xids: list[int] = field(default_factory=list)  # XID events not yet delivered


class NvmlStandIn:
    """NVML's calls the GPU watch makes, with nvidia-ml-py's names, constants and error values,
    answering for `cards` by index. A call named in `unsupported` raises NotSupported, as on a
    card (or driver) without it."""

    NVML_CLOCK_SM = 1
    NVML_TEMPERATURE_GPU = 0
    NVML_ERROR_NOT_SUPPORTED = 3
    NVML_ERROR_TIMEOUT = 10

    class NVMLError(Exception):
        def __init__(self, value: int) -> None:
            super().__init__(f"NVML error {value}")
            self.value = value

    def __init__(self, cards: dict[int, Card], unsupported: tuple[str, ...] = ()) -> None:
        self.cards, self.unsupported = cards, set(unsupported)
        self.registered: set[int] = set()
        for name in [n for n in dir(type(self)) if n.startswith("nvml")]:
            if name in self.unsupported:
                setattr(self, name, self._not_supported)

    def _not_supported(self, *args):
        raise self.NVMLError(self.NVML_ERROR_NOT_SUPPORTED)

    def nvmlDeviceGetHandleByIndex(self, index):  # noqa: N802 - NVML's names
        return self.cards[index]

    def nvmlDeviceGetIndex(self, card):  # noqa: N802
        return next(index for index, known in self.cards.items() if known is card)

    def nvmlDeviceGetClockInfo(self, card, kind):  # noqa: N802
        return card.sm_mhz if kind == 1 else card.memory_mhz

    def nvmlDeviceGetMaxClockInfo(self, card, kind):  # noqa: N802
        return card.max_sm_mhz

    def nvmlDeviceGetApplicationsClock(self, card, kind):  # noqa: N802
        return card.application_clocks[kind][0]

    def nvmlDeviceGetDefaultApplicationsClock(self, card, kind):  # noqa: N802
        return card.application_clocks[kind][1]

    def nvmlDeviceGetUtilizationRates(self, card):  # noqa: N802
        return SimpleNamespace(gpu=card.utilization)

    def nvmlDeviceGetCurrentClocksEventReasons(self, card):  # noqa: N802
        return card.reasons

    def nvmlDeviceGetComputeRunningProcesses(self, card):  # noqa: N802
        return [SimpleNamespace(pid=pid) for pid in card.pids]

    def nvmlDeviceGetTemperature(self, card, sensor):  # noqa: N802
        return card.temperature_c

    def nvmlDeviceGetPowerUsage(self, card):  # noqa: N802 - milliwatts
        return int(card.power_w * 1000)

    def nvmlDeviceGetTotalEnergyConsumption(self, card):  # noqa: N802 - millijoules
        if card.energy_mj is None:
            return card.power_w * time.perf_counter() * 1000
        return int(card.energy_mj)

    def nvmlDeviceGetEnforcedPowerLimit(self, card):  # noqa: N802 - milliwatts
        return int(card.power_limit_w * 1000)

    def nvmlDeviceGetPowerManagementDefaultLimit(self, card):  # noqa: N802 - milliwatts
        return int(card.default_power_limit_w * 1000)

    def nvmlDeviceGetTotalEccErrors(self, card, error_type, counter_type):  # noqa: N802
        return card.uncorrected_ecc

    def nvmlDeviceGetViolationStatus(self, card, policy):  # noqa: N802
        if policy not in card.violation_ns:
            raise self.NVMLError(self.NVML_ERROR_NOT_SUPPORTED)
        return SimpleNamespace(referenceTime=0, violationTime=card.violation_ns[policy])

    def nvmlEventSetCreate(self):  # noqa: N802
        return "event set"

    def nvmlDeviceRegisterEvents(self, card, event_types, event_set):  # noqa: N802
        self.registered.add(self.nvmlDeviceGetIndex(card))

    def nvmlEventSetWait_v2(self, event_set, timeout_ms):  # noqa: N802
        for index in sorted(self.registered):
            if self.cards[index].xids:
                xid = self.cards[index].xids.pop(0)
                return SimpleNamespace(device=self.cards[index], eventType=0x8, eventData=xid)
        raise self.NVMLError(self.NVML_ERROR_TIMEOUT)

    def nvmlEventSetFree(self, event_set):  # noqa: N802
        self.registered.clear()


def h200_card(measurement: dict) -> Card:
    """The H200 during one recorded measurement: busy at its recorded share of the maximum SM
    clock, SW power cap active, at the temperature its line named."""
    card = H200["card"]
    share = measurement["disturbance"]["gpus"][0]["sm_clock_share"]
    return Card(sm_mhz=round(share * card["max_sm_mhz"]), max_sm_mhz=card["max_sm_mhz"],
                reasons=0x4, temperature_c=measurement["temperature_c"],
                power_limit_w=card["power_limit_w"],
                default_power_limit_w=card["default_power_limit_w"],
                uncorrected_ecc=card["volatile_uncorrected_ecc"])
