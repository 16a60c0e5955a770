"""Marker arguments, requirements and the exact skip reasons."""

from __future__ import annotations

import pytest

from pytest_llmperf.machine.hardware import Hardware
from pytest_llmperf.plugin.markers import (
    MARKER_DOCS,
    HardwareRequirement,
    parse_requirements,
    skip_reason,
)

H100 = Hardware("h100", "NVIDIA H100 80GB HBM3", 1, "nvml")
H100_X8 = Hardware("h100", "NVIDIA H100 80GB HBM3", 8, "nvml")
H200_X8 = Hardware("h200", "NVIDIA H200", 8, "nvml")
A100_40 = Hardware("a100-40gb", "NVIDIA A100-SXM4-40GB", 1, "nvml")
A100_80 = Hardware("a100-80gb", "NVIDIA A100-SXM4-80GB", 4, "nvml")
L4 = Hardware("gpu", "NVIDIA L4", 2, "nvml")
CPU = Hardware(
    "cpu", "AMD EPYC", 0, "cpu", cpu_model="AMD EPYC", cpu_cores=2, cpu_flags=("avx2", "avx512f")
)


def mark(name, *args, **kwargs):
    return (name, args, kwargs)


def reason(marks, hardware):
    return skip_reason(parse_requirements(marks), hardware)


# ---------------------------------------------------------------- what runs where


@pytest.mark.parametrize("hardware", [H100, A100_40, L4, CPU])
def test_no_hardware_marker_runs_anywhere(hardware):
    requirement = parse_requirements([mark("parametrize", "x", [1]), mark("slow")])
    assert requirement == HardwareRequirement()
    assert skip_reason(requirement, hardware) is None


@pytest.mark.parametrize(
    ("marks", "hardware"),
    [
        ([mark("h100")], H100),
        ([mark("h200")], H200_X8),
        ([mark("cpu")], CPU),
        ([mark("a100")], A100_40),
        ([mark("a100")], A100_80),
        ([mark("a100", memory_gb=80)], A100_80),
        ([mark("a100", memory_gb=40)], A100_40),
        ([mark("h100"), mark("h200")], H200_X8),
        ([mark("h100"), mark("h200")], H100),
        ([mark("gpus", 8)], H200_X8),
        ([mark("gpus", n=2)], L4),
        ([mark("h100"), mark("gpus", 8)], H100_X8),
    ],
)
def test_satisfied(marks, hardware):
    assert reason(marks, hardware) is None


@pytest.mark.parametrize(
    ("marks", "hardware", "expected"),
    [
        ([mark("h200")], H100, "needs h200; found 1x NVIDIA H100 80GB HBM3"),
        ([mark("gpus", 8)], H100, "needs 8 GPUs; found 1x NVIDIA H100 80GB HBM3"),
        ([mark("gpus", 1)], CPU, "needs 1 GPU; found cpu (AMD EPYC, 2 cores, avx512)"),
        ([mark("a100", memory_gb=80)], A100_40,
         "needs a100 (80 GB); found 1x NVIDIA A100-SXM4-40GB"),
        ([mark("a100")], H100, "needs a100; found 1x NVIDIA H100 80GB HBM3"),
        ([mark("h100"), mark("h200")], CPU,
         "needs h100 or h200; found cpu (AMD EPYC, 2 cores, avx512)"),
        ([mark("cpu")], H100, "needs cpu; found 1x NVIDIA H100 80GB HBM3"),
        ([mark("h100")], L4, "needs h100; found 2x NVIDIA L4"),
        ([mark("h200"), mark("gpus", 8)], H100,
         "needs h200 and 8 GPUs; found 1x NVIDIA H100 80GB HBM3"),
        ([mark("h200")], Hardware("h100", "h100", 2, "override"),
         "needs h200; found 2x h100 (override)"),
    ],
)  # fmt: skip
def test_skip_reasons(marks, hardware, expected):
    assert reason(marks, hardware) == expected


def test_duplicate_class_markers_are_named_once():
    marks = [mark("h100"), mark("h100"), mark("a100"), mark("a100", memory_gb=None)]
    assert reason(marks, H200_X8) == "needs h100 or a100; found 8x NVIDIA H200"


def test_closest_gpus_marker_wins():
    # item.iter_markers() yields the function's marks before the module's pytestmark.
    requirement = parse_requirements([mark("gpus", 2), mark("h100"), mark("gpus", 8)])
    assert requirement.min_gpus == 2
    assert skip_reason(requirement, Hardware("h100", "NVIDIA H100 80GB HBM3", 2, "nvml")) is None


# ---------------------------------------------------------------- bad arguments


@pytest.mark.parametrize(
    ("marks", "message"),
    [
        ([mark("a100", memory_gb=60)],
         "@pytest.mark.a100(memory_gb=60): memory_gb must be 40 or 80"),
        ([mark("a100", memory_gb="80")],
         "@pytest.mark.a100(memory_gb='80'): memory_gb must be 40 or 80"),
        ([mark("gpus", 0)], "@pytest.mark.gpus(0): n must be a positive integer"),
        ([mark("gpus", "8")], "@pytest.mark.gpus('8'): n must be a positive integer"),
        ([mark("gpus", True)], "@pytest.mark.gpus(True): n must be a positive integer"),
    ],
)  # fmt: skip
def test_bad_values_are_value_errors_naming_the_marker(marks, message):
    with pytest.raises(ValueError) as excinfo:
        parse_requirements(marks)
    assert str(excinfo.value) == message


@pytest.mark.parametrize(
    ("marks", "message"),
    [
        ([mark("a100", memroy_gb=80)],
         "@pytest.mark.a100(memroy_gb=80): bad arguments; the signature is a100(memory_gb=None)"),
        ([mark("a100", 80)],
         "@pytest.mark.a100(80): bad arguments; the signature is a100(memory_gb=None)"),
        ([mark("h100", count=2)],
         "@pytest.mark.h100(count=2): bad arguments; the signature is h100 (no arguments)"),
        ([mark("cpu", "fast")],
         "@pytest.mark.cpu('fast'): bad arguments; the signature is cpu (no arguments)"),
        ([mark("gpus")], "@pytest.mark.gpus: bad arguments; the signature is gpus(n)"),
        ([mark("gpus", count=8)],
         "@pytest.mark.gpus(count=8): bad arguments; the signature is gpus(n)"),
        ([mark("gpus", 8, n=8)],
         "@pytest.mark.gpus(8, n=8): bad arguments; the signature is gpus(n)"),
        ([mark("gpus", 8, 2)], "@pytest.mark.gpus(8, 2): bad arguments; the signature is gpus(n)"),
    ],
)  # fmt: skip
def test_typos_are_type_errors_naming_the_signature(marks, message):
    with pytest.raises(TypeError) as excinfo:
        parse_requirements(marks)
    assert str(excinfo.value) == message


# ---------------------------------------------------------------- registration


def test_marker_docs_are_ini_lines_with_signatures():
    assert MARKER_DOCS["a100"].startswith("a100(memory_gb=None): ")
    assert MARKER_DOCS["gpus"].startswith("gpus(n): ")
    assert set(MARKER_DOCS) == {"h100", "h200", "a100", "cpu", "gpus"}
    for name, line in MARKER_DOCS.items():
        assert line.startswith(name) and ": " in line and "\n" not in line
