"""Hooks a conftest.py or a plugin of the plugin can implement: how pytest-llmperf sees the
machine, and what the `llmperf` fixture's calls do (a measuring mode of its own)."""

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


@pytest.hookspec(firstresult=True)
def pytest_llmperf_make_measurer(config: pytest.Config, measuring):
    """Return the measurer the `llmperf` fixture hands its five calls to in this session (an
    object with `run`, `ab`, `sweep`, `capacity` and `offline`, as plugin/measurers.Measurer
    says), or None to leave the choice to others.

    `measuring`: what measuring would be this session (plugin/measurers.Measure, or AbMeasure
    under --llmperf-ab), to wrap or hand calls on to. The first non-None answer wins; the
    built-in one (--llmperf-check-baselines, --llmperf-check-args, else `measuring`) runs last,
    so a plugin adds a mode, behind an option of its own, as pytest-xdist's
    `pytest_xdist_make_scheduler` lets one add a scheduler.
    """
