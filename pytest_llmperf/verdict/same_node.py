"""A before/after comparison on one node (`--llmperf-save` before a driver or firmware upgrade,
`--llmperf-compare` after): it holds only where the node and its cards are the same, so another
host or another set of GPUs is refused with one line, and what did change (driver, CUDA, vLLM,
...) is named beside the verdict (docs/upgrades.md). Pure: no pytest.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["STACK_KEYS", "refusal", "stack_changes"]

# The software and firmware a before/after comparison is about, in the order a reader looks.
STACK_KEYS = (("driver", "driver_version"), ("CUDA", "cuda_version"), ("vLLM", "vllm"),
              ("torch", "torch"), ("transformers", "transformers"), ("python", "python"),
              ("pytest-llmperf", "pytest_llmperf"))
# The cards' own identities, where the fingerprint records them (NVML's UUIDs or serials).
GPU_IDENTITY_KEYS = ("gpu_uuids", "gpu_serials")


def refusal(saved: Mapping[str, Any], current: Mapping[str, Any], name: str) -> str | None:
    """Why the saved run `name` is no before/after reference for this run, or None."""
    saved_host, host = saved.get("host"), current.get("host")
    if saved_host and host and saved_host != host:
        return (f"--llmperf-compare {name}: saved on host {saved_host}, this run is on {host}; "
                "a before/after comparison holds on one node only: save the 'before' run on "
                f"{host} (--llmperf-save NAME), or compare two nodes with an A/B")
    for key in GPU_IDENTITY_KEYS:
        before, after = saved.get(key), current.get(key)
        if before and after and list(before) != list(after):
            return (f"--llmperf-compare {name}: saved on other GPUs ({key} {_text(before)}, "
                    f"now {_text(after)}); a before/after comparison holds on the same cards "
                    "only: pin the test to them (CUDA_VISIBLE_DEVICES) or save the run again")
    return None


def stack_changes(saved: Mapping[str, Any], current: Mapping[str, Any]) -> list[str]:
    """"driver 570.86.15 -> 580.159.04", one per fact that changed; [] when none did."""
    return [f"{label} {_text(saved.get(key))} -> {_text(current.get(key))}"
            for label, key in STACK_KEYS if saved.get(key) != current.get(key)]


def _text(value: Any) -> str:
    if value is None:
        return "unknown"
    if isinstance(value, (list, tuple)):
        return ",".join(str(item) for item in value)
    return str(value)
