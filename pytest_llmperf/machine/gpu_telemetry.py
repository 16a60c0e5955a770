"""One card's own account over a measurement, read through NVML: its clocks, power, temperature,
the clocks-event reasons active, NVML's violation counters and its energy counter, sampled while
the measurement runs, and the settings an administrator can lower (power limit, application
clocks), read once. What is read and why: docs/gpu-telemetry.md. NVML's calls:
https://docs.nvidia.com/deploy/nvml-api/group__nvmlDeviceQueries.html

`nvml` is the `pynvml` module (nvidia-ml-py) or a stand-in with the same calls. A read the card
or its driver does not offer (NVMLError_NotSupported, NoPermission, FunctionNotFound) leaves its
part out (None); nothing here fails for a card that lacks a counter.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["CardSettings", "GpuTelemetry", "REASON_NAMES", "Sample", "nvml_call", "optional",
           "read_sample", "read_settings", "summarize", "uncorrected_ecc"]

# A card below this utilization is between requests, and its clock is allowed to drop then.
BUSY_UTILIZATION = 50

# NVML's clocks-event reason bits, by name (nvmlClocksEventReasons:
# https://docs.nvidia.com/deploy/nvml-api/group__nvmlClocksEventReasons.html). A bit NVML adds
# later is kept under its hex value.
REASON_NAMES = {
    0x1: "gpu idle",
    0x2: "applications clocks setting",
    0x4: "sw power cap",
    0x8: "hw slowdown",
    0x10: "sync boost",
    0x20: "sw thermal slowdown",
    0x40: "hw thermal slowdown",
    0x80: "hw power brake slowdown",
    0x100: "display clock setting",
}

# nvmlPerfPolicyType_t: how long each limiter held the card below its application clocks
# (nvmlDeviceGetViolationStatus, nanoseconds since the driver loaded).
VIOLATION_POLICIES = {
    "power": 0,
    "thermal": 1,
    "sync boost": 2,
    "board limit": 3,
    "low utilization": 4,
    "reliability": 5,
    "below application clocks": 10,  # any of the above
    "below base clocks": 11,
}

# NVML_ERROR_NOT_SUPPORTED, NVML_ERROR_NO_PERMISSION, NVML_ERROR_FUNCTION_NOT_FOUND: this card or
# driver does not offer the read (an older card, a vGPU, a driver without the call).
UNAVAILABLE = frozenset({3, 4, 13})
# nvmlClockType_t
CLOCK_SM, CLOCK_MEM = 1, 2


def optional(nvml: Any, read: Callable[..., Any], *args: Any) -> Any:
    """`read(*args)`, or None where the card or its driver does not offer it."""
    try:
        return read(*args)
    except nvml.NVMLError as exc:
        if getattr(exc, "value", None) in UNAVAILABLE:
            return None
        raise


def nvml_call(nvml: Any, name: str, *args: Any) -> Any:
    """NVML's `name(*args)`, or None where this nvidia-ml-py has no such function or the card
    does not support it."""
    read = getattr(nvml, name, None)
    return None if read is None else optional(nvml, read, *args)


def _scaled(value: Any, factor: float) -> float | None:
    return None if value is None else float(value) * factor


@dataclass(frozen=True)
class CardSettings:
    """What an administrator can set below the card's defaults, read once per measurement, and
    the counters read before and after it."""

    max_sm_mhz: float | None = None
    power_limit_w: float | None = None  # nvmlDeviceGetEnforcedPowerLimit
    default_power_limit_w: float | None = None  # nvmlDeviceGetPowerManagementDefaultLimit
    # (domain, application clock, default application clock) in MHz, per clock domain read
    application_clocks: tuple[tuple[str, float, float], ...] = ()
    uncorrected_ecc: int | None = None  # volatile uncorrected ECC errors so far


def read_settings(nvml: Any, handle: Any) -> CardSettings:
    clocks = []
    for domain, kind in (("SM", CLOCK_SM), ("memory", CLOCK_MEM)):
        now = nvml_call(nvml, "nvmlDeviceGetApplicationsClock", handle, kind)
        default = nvml_call(nvml, "nvmlDeviceGetDefaultApplicationsClock", handle, kind)
        if now is not None and default:
            clocks.append((domain, float(now), float(default)))
    return CardSettings(
        max_sm_mhz=_scaled(nvml_call(nvml, "nvmlDeviceGetMaxClockInfo", handle, CLOCK_SM), 1.0),
        power_limit_w=_scaled(nvml_call(nvml, "nvmlDeviceGetEnforcedPowerLimit", handle), 1e-3),
        default_power_limit_w=_scaled(
            nvml_call(nvml, "nvmlDeviceGetPowerManagementDefaultLimit", handle), 1e-3),
        application_clocks=tuple(clocks),
        uncorrected_ecc=uncorrected_ecc(nvml, handle),
    )


def uncorrected_ecc(nvml: Any, handle: Any) -> int | None:
    """Volatile (since the driver loaded) uncorrected ECC errors; None without ECC."""
    # NVML_MEMORY_ERROR_TYPE_UNCORRECTED = 1, NVML_VOLATILE_ECC = 0
    found = nvml_call(nvml, "nvmlDeviceGetTotalEccErrors", handle, 1, 0)
    return None if found is None else int(found)


@dataclass(frozen=True)
class Sample:
    """One reading of a card; a field is None where the card does not offer it."""

    time_s: float  # time.perf_counter(), the clock the client's request records use
    reasons: int | None = None  # clocks-event reason bits
    busy: bool | None = None  # utilization at least BUSY_UTILIZATION
    sm_mhz: float | None = None
    memory_mhz: float | None = None
    power_w: float | None = None
    temperature_c: float | None = None
    energy_mj: float | None = None  # nvmlDeviceGetTotalEnergyConsumption: mJ since driver load
    violation_ns: tuple[tuple[str, int], ...] = ()


def _reasons(nvml: Any, handle: Any) -> int | None:
    # nvidia-ml-py 12.535 renamed "throttle" reasons to "clocks event" reasons; both read one bit
    # mask, and older drivers only have the old name.
    for name in ("nvmlDeviceGetCurrentClocksEventReasons",
                 "nvmlDeviceGetCurrentClocksThrottleReasons"):
        if hasattr(nvml, name):
            return nvml_call(nvml, name, handle)
    return None


def read_sample(nvml: Any, handle: Any, clock: Callable[[], float]) -> Sample:
    """One reading of the card; `clock()` (time.perf_counter) dates it, taken right before the
    energy counter so the two agree."""
    time_s = clock()
    energy_mj = nvml_call(nvml, "nvmlDeviceGetTotalEnergyConsumption", handle)
    utilization = nvml_call(nvml, "nvmlDeviceGetUtilizationRates", handle)
    violations = []
    for name, policy in VIOLATION_POLICIES.items():
        found = nvml_call(nvml, "nvmlDeviceGetViolationStatus", handle, policy)
        if found is not None:
            violations.append((name, int(found.violationTime)))
    return Sample(
        time_s=time_s, reasons=_reasons(nvml, handle),
        busy=None if utilization is None else utilization.gpu >= BUSY_UTILIZATION,
        sm_mhz=_scaled(nvml_call(nvml, "nvmlDeviceGetClockInfo", handle, CLOCK_SM), 1.0),
        memory_mhz=_scaled(nvml_call(nvml, "nvmlDeviceGetClockInfo", handle, CLOCK_MEM), 1.0),
        power_w=_scaled(nvml_call(nvml, "nvmlDeviceGetPowerUsage", handle), 1e-3),
        # NVML_TEMPERATURE_GPU = 0
        temperature_c=_scaled(nvml_call(nvml, "nvmlDeviceGetTemperature", handle, 0), 1.0),
        energy_mj=_scaled(energy_mj, 1.0),
        violation_ns=tuple(violations),
    )


@dataclass(frozen=True)
class GpuTelemetry:
    """One card over one measurement's window: what the card did, never a verdict."""

    index: str
    window_s: float
    samples: int
    sm_clock_mhz_mean: float | None = None
    sm_clock_mhz_min: float | None = None
    memory_clock_mhz_mean: float | None = None
    memory_clock_mhz_min: float | None = None
    power_w_mean: float | None = None
    power_w_max: float | None = None
    temperature_c_max: float | None = None
    energy_j: float | None = None  # the energy counter's rise over the window
    power_limit_w: float | None = None
    # busy samples' mean SM clock over the card's maximum (the card's own power management sets
    # it: no verdict)
    sm_clock_share: float | None = None
    # share of samples each clocks-event reason was active in, by name
    reason_shares: tuple[tuple[str, float], ...] = ()
    # share of the window NVML's violation counters say each limiter held the clocks below the
    # application clocks, by policy name
    violation_shares: tuple[tuple[str, float], ...] = ()

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for name, value in self.__dict__.items():
            if name.endswith("_shares"):
                out[name] = {key: round(share, 4) for key, share in value}
            elif isinstance(value, float):
                out[name] = round(value, 3) if math.isfinite(value) else None
            else:
                out[name] = value
        return out

    @classmethod
    def from_dict(cls, plain: Mapping[str, Any]) -> GpuTelemetry:
        """Inverse of to_dict (its rounding aside); fields it does not know are ignored."""
        known = {name: plain[name] for name in cls.__dataclass_fields__ if name in plain}
        for name in ("reason_shares", "violation_shares"):
            known[name] = tuple((str(key), float(share))
                                for key, share in (plain.get(name) or {}).items())
        return cls(**known)


def _mean(values: Sequence[float]) -> float | None:
    return sum(values) / len(values) if values else None


def _values(samples: Sequence[Sample], field: str) -> list[float]:
    return [value for sample in samples if (value := getattr(sample, field)) is not None]


def _at(points: Sequence[tuple[float, float]], time_s: float) -> float:
    """A counter's value at `time_s`, linear between the readings around it (the nearest reading
    outside them)."""
    if time_s <= points[0][0]:
        return points[0][1]
    for (t0, v0), (t1, v1) in zip(points, points[1:]):
        if time_s <= t1:
            return v0 + (v1 - v0) * (time_s - t0) / (t1 - t0) if t1 > t0 else v1
    return points[-1][1]


def _rise(points: Sequence[tuple[float, float]], start_s: float, end_s: float) -> float | None:
    if len(points) < 2:
        return None
    return _at(points, end_s) - _at(points, start_s)


def _reason_shares(samples: Sequence[Sample]) -> tuple[tuple[str, float], ...]:
    masks = [sample.reasons for sample in samples if sample.reasons is not None]
    if not masks:
        return ()
    seen = 0
    for mask in masks:
        seen |= mask
    bits = [1 << n for n in range(seen.bit_length()) if seen & (1 << n)]
    return tuple((REASON_NAMES.get(bit, hex(bit)), sum(bool(m & bit) for m in masks) / len(masks))
                 for bit in bits)


def _violation_shares(samples: Sequence[Sample], start_s: float,
                      end_s: float) -> tuple[tuple[str, float], ...]:
    if end_s <= start_s:
        return ()
    shares = []
    readings = [(sample.time_s, dict(sample.violation_ns)) for sample in samples]
    for name in VIOLATION_POLICIES:
        points = [(time_s, float(found[name])) for time_s, found in readings if name in found]
        rise = _rise(points, start_s, end_s)
        if rise is not None:
            shares.append((name, min(1.0, max(0.0, rise / 1e9 / (end_s - start_s)))))
    return tuple(shares)


def summarize(index: str, samples: Sequence[Sample], settings: CardSettings,
              window: tuple[float, float] | None = None) -> GpuTelemetry:
    """The card over `window` (perf_counter start and end: the measured requests), or over all
    the samples. Counters (energy, violations) are read between the samples around the window's
    ends; the other readings are the samples inside it (all of them where none fell inside)."""
    samples = sorted(samples, key=lambda sample: sample.time_s)
    if window is None:
        window = (samples[0].time_s, samples[-1].time_s) if samples else (0.0, 0.0)
    start_s, end_s = window
    inside = [s for s in samples if start_s <= s.time_s <= end_s] or list(samples)
    busy_clocks = [s.sm_mhz for s in inside if s.busy and s.sm_mhz is not None]
    top = settings.max_sm_mhz
    energy = _rise([(s.time_s, s.energy_mj) for s in samples if s.energy_mj is not None],
                   start_s, end_s)
    sm, memory, power = (_values(inside, name) for name in ("sm_mhz", "memory_mhz", "power_w"))
    temperatures = _values(inside, "temperature_c")
    return GpuTelemetry(
        index=index, window_s=max(0.0, end_s - start_s), samples=len(inside),
        sm_clock_mhz_mean=_mean(sm), sm_clock_mhz_min=min(sm, default=None),
        memory_clock_mhz_mean=_mean(memory), memory_clock_mhz_min=min(memory, default=None),
        power_w_mean=_mean(power), power_w_max=max(power, default=None),
        temperature_c_max=max(temperatures, default=None),
        energy_j=None if energy is None else energy / 1e3,
        power_limit_w=settings.power_limit_w,
        sm_clock_share=(_mean(busy_clocks) / top) if busy_clocks and top else None,
        reason_shares=_reason_shares(inside),
        violation_shares=_violation_shares(samples, start_s, end_s),
    )
