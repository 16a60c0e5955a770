"""Fingerprints for tests: a machine's typed Fingerprint (machine/hardware.py) from the few flat
facts a test cares about, the rest left at what a detection that knows nothing else gives."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import fields
from typing import Any

from pytest_llmperf.machine.hardware import SOFTWARE_KEYS, Fingerprint, Hardware

_HARDWARE = {f.name for f in fields(Hardware)}


def fingerprint_of(flat: Mapping[str, Any]) -> Fingerprint:
    """{"hardware_class": "h100", "device_count": 8, "vllm": "0.31.0"} as a Fingerprint: a CPU
    machine named "cpu", detected by "test", unless `flat` says otherwise."""
    hardware = {"hardware_class": "cpu", "device_name": "cpu", "device_count": 0,
                "source": "test", **{k: v for k, v in flat.items() if k in _HARDWARE}}
    hardware["cpu_flags"] = tuple(hardware.get("cpu_flags", ()))
    unknown = set(flat) - _HARDWARE - set(SOFTWARE_KEYS)
    if unknown:
        raise ValueError(f"not a fingerprint's: {sorted(unknown)}")
    return Fingerprint(Hardware(**hardware), {k: v for k, v in flat.items() if k in SOFTWARE_KEYS})


CPU = fingerprint_of({})
