"""Hardware markers: their arguments, what a test requires, and why it is skipped.

Pure: the plugin hands in each item's marks as (name, args, kwargs) and the detected
`Hardware`, and gets back a skip reason or None. Marker arguments are parsed into keyword-only
frozen dataclasses, so a misspelt keyword is a TypeError rather than a silently ignored kwarg.

    @pytest.mark.h100                     only on an H100
    @pytest.mark.h100 @pytest.mark.h200   on either (several class markers mean "any of these")
    @pytest.mark.a100(memory_gb=80)       only on the 80 GB A100 (no argument: either size)
    @pytest.mark.gpus(8)                  at least 8 usable GPUs, on whatever class
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, fields
from typing import Any

from pytest_llmperf.errors import InputError
from pytest_llmperf.machine.hardware import Hardware
from pytest_llmperf.numbers import is_whole

__all__ = [
    "HARDWARE_MARKERS",
    "MARKER_DOCS",
    "A100Args",
    "GpusArgs",
    "HardwareRequirement",
    "NoArgs",
    "parse_requirements",
    "skip_reason",
]


@dataclass(frozen=True, kw_only=True)
class NoArgs:
    """h100, h200 and cpu take no arguments."""


@dataclass(frozen=True, kw_only=True)
class A100Args:
    memory_gb: int | None = None

    def __post_init__(self) -> None:
        if self.memory_gb not in (None, 40, 80):
            raise ValueError("memory_gb must be 40 or 80")


@dataclass(frozen=True, kw_only=True)
class GpusArgs:
    n: int

    def __post_init__(self) -> None:
        # bool is an int subclass; gpus(True) is surely a mistake.
        if not is_whole(self.n, 1):
            raise InputError("n must be a positive integer")


@dataclass(frozen=True)
class _MarkerSpec:
    args: type
    positional: tuple[str, ...]  # fields that may also be given positionally, in order
    signature: str
    description: str


_SPECS = {
    "h100": _MarkerSpec(NoArgs, (), "h100", "run only on NVIDIA H100 GPUs; skipped elsewhere."),
    "h200": _MarkerSpec(NoArgs, (), "h200", "run only on NVIDIA H200 GPUs; skipped elsewhere."),
    "a100": _MarkerSpec(
        A100Args,
        (),
        "a100(memory_gb=None)",
        "run only on NVIDIA A100 GPUs; memory_gb=40 or 80 picks one size. Skipped elsewhere.",
    ),
    "cpu": _MarkerSpec(NoArgs, (), "cpu", "run only when no GPU is used (vLLM on the CPU)."),
    "gpus": _MarkerSpec(
        GpusArgs,
        ("n",),
        "gpus(n)",
        "needs at least n usable GPUs (after CUDA_VISIBLE_DEVICES). Skipped otherwise.",
    ),
}

HARDWARE_MARKERS = ("h100", "h200", "a100", "cpu")

# The lines for pytest's `markers` ini option, which the plugin registers.
MARKER_DOCS: dict[str, str] = {
    name: f"{spec.signature}: {spec.description}" for name, spec in _SPECS.items()
}


@dataclass(frozen=True)
class HardwareTarget:
    """One acceptable kind of hardware: how to name it, and the classes that satisfy it."""

    label: str
    classes: frozenset[str]


@dataclass(frozen=True)
class HardwareRequirement:
    """What a test needs. No targets: any class will do; min_gpus None: no count required."""

    targets: tuple[HardwareTarget, ...] = ()
    min_gpus: int | None = None


def parse_requirements(marks: Iterable[tuple[str, tuple, dict]]) -> HardwareRequirement:
    """Build the requirement from an item's marks, closest first (as `item.iter_markers()`).

    Marks that are not ours are ignored. Class markers accumulate (any of them will do); for
    `gpus` the closest mark wins, so a test can relax its module's `pytestmark = gpus(8)`.
    """
    targets: list[HardwareTarget] = []
    min_gpus = None
    for name, args, kwargs in marks:
        if name not in _SPECS:
            continue
        parsed = _parse_args(name, tuple(args), dict(kwargs))
        if isinstance(parsed, GpusArgs):
            min_gpus = parsed.n if min_gpus is None else min_gpus
            continue
        target = _target(name, parsed)
        if target not in targets:
            targets.append(target)
    return HardwareRequirement(tuple(targets), min_gpus)


def _parse_args(name: str, args: tuple, kwargs: dict[str, Any]) -> Any:
    spec = _SPECS[name]
    call = _call_text(name, args, kwargs)
    usage = spec.signature if fields(spec.args) else f"{name} (no arguments)"
    bad_arguments = TypeError(f"{call}: bad arguments; the signature is {usage}")
    if len(args) > len(spec.positional) or set(kwargs) & set(spec.positional[: len(args)]):
        raise bad_arguments
    try:
        return spec.args(**dict(zip(spec.positional, args)), **kwargs)
    except TypeError:
        # The dataclass's own message names its __init__; ours names the marker and the fix.
        raise bad_arguments from None
    except ValueError as exc:
        raise ValueError(f"{call}: {exc}") from None


def _call_text(name: str, args: tuple, kwargs: dict[str, Any]) -> str:
    """The marker as the user wrote it: "@pytest.mark.a100(memory_gb=60)"."""
    parts = [repr(arg) for arg in args] + [f"{key}={value!r}" for key, value in kwargs.items()]
    return f"@pytest.mark.{name}({', '.join(parts)})" if parts else f"@pytest.mark.{name}"


def _target(name: str, parsed: Any) -> HardwareTarget:
    if name == "a100":
        if parsed.memory_gb is None:
            return HardwareTarget("a100", frozenset({"a100-40gb", "a100-80gb"}))
        label, hardware_class = f"a100 ({parsed.memory_gb} GB)", f"a100-{parsed.memory_gb}gb"
        return HardwareTarget(label, frozenset({hardware_class}))
    return HardwareTarget(name, frozenset({name}))


def skip_reason(requirement: HardwareRequirement, hardware: Hardware) -> str | None:
    """None when `hardware` satisfies `requirement`; else "needs h200; found 1x NVIDIA H100 ..."."""
    missing = []
    targets = requirement.targets
    if targets and not any(hardware.hardware_class in t.classes for t in targets):
        missing.append(" or ".join(target.label for target in targets))
    wanted = requirement.min_gpus
    if wanted is not None and hardware.device_count < wanted:
        missing.append(f"{wanted} GPU" if wanted == 1 else f"{wanted} GPUs")
    if not missing:
        return None
    return f"needs {' and '.join(missing)}; found {hardware.describe()}"
