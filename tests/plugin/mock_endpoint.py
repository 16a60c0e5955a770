"""The mock server behind --llmperf-endpoint, as the plugin tests meet it
(pytest_llmperf/clientbench/mockserver.py: any model name, `step_s` between chunks): a module
fixture of one, and the options of a run against it."""

from __future__ import annotations

from typing import Any

import pytest

from pytest_llmperf.clientbench.mockprocess import MockProcess

# The client's self-check only warns, from one client process: a busy CI machine's lag is not
# what these tests are about.
CALM = ("--llmperf-client-check", "warn", "--llmperf-client-workers", "1")


def mock_fixture(step_s: float = 0.005, **options: Any):
    """A module-scoped fixture: a MockProcess(step_s, **options), stopped after the module."""
    @pytest.fixture(scope="module")
    def server():
        process = MockProcess(step_s, **options)
        yield process
        process.stop()

    return server


def against(url: str) -> tuple[str, ...]:
    """pytest options of a run measuring the mock at `url` as a CPU endpoint."""
    return ("-p", "no:cacheprovider", "--llmperf-endpoint", url, "--llmperf-hardware", "cpu",
            "--llmperf-model", "mock")
