"""Hooks a conftest.py can implement to change how pytest-llmperf sees the machine."""

from __future__ import annotations

import pytest


@pytest.hookspec(firstresult=True)
def pytest_llmperf_detect_hardware(config: pytest.Config):
    """Return the `pytest_llmperf.machine.hardware.Hardware` this session runs on.

    The first non-None answer wins; the built-in one (the --llmperf-hardware override, NVML,
    nvidia-smi, then the CPU) runs last, so a conftest can answer first for unusual machines.
    """


@pytest.hookspec(firstresult=True)
def pytest_llmperf_engine_env(config: pytest.Config):
    """Return extra environment variables (dict) for every engine this process starts.

    The built-in answer pins pytest-xdist workers to their own GPUs or CPU cores.
    """
