"""`--llmperf-expect`: the environment a run must find, checked against the fingerprint before any
engine starts. A node whose driver or vLLM drifted is refused up front, instead of being measured
as if it had not and found out by the trend gate nights later (docs/upgrades.md).

    --llmperf-expect 'vllm==0.24.0,driver=580.*,cuda=13.0,gpu=NVIDIA H200'

Each item is KEY=PATTERN (or KEY==PATTERN, as pip spells a pin): PATTERN is a shell-style pattern
(`fnmatch.fnmatchcase`: `*`, `?`, `[...]`), matched against the whole value, case and all. Pure:
the plugin turns mismatches into the run's stop (plugin/hooks.py).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from fnmatch import fnmatchcase
from typing import Any

__all__ = ["EXPECT_KEYS", "Expectation", "mismatches", "parse_expectations"]

# What a user calls each fact -> the fingerprint's key (machine/hardware.py, Fingerprint.to_dict).
EXPECT_KEYS = {
    "vllm": "vllm",
    "torch": "torch",
    "transformers": "transformers",
    "python": "python",
    "pytest_llmperf": "pytest_llmperf",
    "driver": "driver_version",
    "cuda": "cuda_version",
    "gpu": "device_name",
    "gpus": "device_count",
    "hardware": "hardware_class",
    "cpu": "cpu_model",
    "host": "host",
}

_ITEM = re.compile(r"^\s*([A-Za-z_-]+)\s*==?\s*(.*?)\s*$")


@dataclass(frozen=True)
class Expectation:
    key: str  # one of EXPECT_KEYS
    pattern: str

    def __str__(self) -> str:
        return f"{self.key}={self.pattern}"


def parse_expectations(text: str) -> tuple[Expectation, ...]:
    """'vllm==0.24.0,driver=580.*' -> Expectations; a ValueError naming the keys it knows for an
    item it cannot read."""
    known = ", ".join(EXPECT_KEYS)
    items = [item for item in text.split(",") if item.strip()]
    if not items:
        raise ValueError(f"expected KEY=PATTERN items separated by commas; keys: {known}")
    out = []
    for item in items:
        match = _ITEM.match(item)
        if not match or not match.group(2):
            raise ValueError(f"{item.strip()!r} is not KEY=PATTERN (e.g. vllm==0.24.0, "
                             f"driver=580.*); keys: {known}")
        key = match.group(1).lower().replace("-", "_")
        if key not in EXPECT_KEYS:
            raise ValueError(f"unknown key {match.group(1)!r}; keys: {known}")
        out.append(Expectation(key, match.group(2)))
    return tuple(out)


def mismatches(expectations: tuple[Expectation, ...],
               fingerprint: Mapping[str, Any]) -> list[str]:
    """One phrase per expectation this fingerprint does not meet, naming the value found."""
    out = []
    for expected in expectations:
        value = fingerprint.get(EXPECT_KEYS[expected.key])
        if value is None or value == "":
            out.append(f"{expected.key} expected {expected.pattern}, found none (not detected "
                       "on this machine)")
        elif not fnmatchcase(str(value), expected.pattern):
            out.append(f"{expected.key} expected {expected.pattern}, found {value}")
    return out


def mismatch_line(expectations: tuple[Expectation, ...],
                  fingerprint: Mapping[str, Any]) -> str | None:
    """The run's one stop line, or None when every expectation is met."""
    found = mismatches(expectations, fingerprint)
    if not found:
        return None
    return ("pytest-llmperf: this machine is not the environment --llmperf-expect names: "
            + "; ".join(found) + "; fix the machine, or the expectation if the change was meant "
            "(docs/upgrades.md)")
