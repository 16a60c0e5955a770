"""--llmperf-expect (machine/expect.py): what a run must find, and the one line when it does not."""

from __future__ import annotations

import pytest

from pytest_llmperf.machine.expect import Expectation, mismatch_line, parse_expectations

H200 = {"vllm": "0.24.0", "driver_version": "580.159.04", "cuda_version": "13.0",
        "device_name": "NVIDIA H200", "device_count": 8, "hardware_class": "h200",
        "host": "gpu-3"}
KEYS = ("vllm, torch, transformers, python, pytest_llmperf, driver, cuda, gpu, gpus, hardware, "
        "cpu, host")


def test_pins_and_patterns_are_read():
    assert parse_expectations("vllm==0.24.0, driver=580.*,cuda=13.0,gpu=NVIDIA H200") == (
        Expectation("vllm", "0.24.0"), Expectation("driver", "580.*"),
        Expectation("cuda", "13.0"), Expectation("gpu", "NVIDIA H200"))


def test_a_machine_that_meets_them_passes():
    expected = parse_expectations("vllm==0.24.0,driver=580.*,cuda=13.0,gpu=NVIDIA H200,gpus=8")
    assert mismatch_line(expected, H200) is None


def test_each_mismatch_is_named_with_the_value_found():
    expected = parse_expectations("vllm==0.25.0,driver=580.*,cuda=12.*,cpu=AMD*")
    assert mismatch_line(expected, H200) == (
        "pytest-llmperf: this machine is not the environment --llmperf-expect names: vllm "
        "expected 0.25.0, found 0.24.0; cuda expected 12.*, found 13.0; cpu expected AMD*, "
        "found none (not detected on this machine); fix the machine, or the expectation if the "
        "change was meant (docs/upgrades.md)")


@pytest.mark.parametrize(("text", "error"), [
    ("vllm", f"'vllm' is not KEY=PATTERN (e.g. vllm==0.24.0, driver=580.*); keys: {KEYS}"),
    ("vllm==", f"'vllm==' is not KEY=PATTERN (e.g. vllm==0.24.0, driver=580.*); keys: {KEYS}"),
    ("gpu_count=8", f"unknown key 'gpu_count'; keys: {KEYS}"),
    (" , ", f"expected KEY=PATTERN items separated by commas; keys: {KEYS}"),
])
def test_what_it_cannot_read_names_the_keys_it_knows(text, error):
    with pytest.raises(ValueError) as raised:
        parse_expectations(text)
    assert str(raised.value) == error
