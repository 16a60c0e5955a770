"""`--llmperf-deadline EPOCH_SECONDS`: tests that would start past the session's time budget are
skipped, with a reason that starts "left out: " (the rule: session/deadline.py).

Registered by plugin/hooks.py when the option is set, as a plugin of its own. Each pytest-xdist
worker keeps its own longest test: the deadline is a time of day, the same for all of them.
"""

from __future__ import annotations

import time

import pytest

from pytest_llmperf.session.deadline import left_out_reason

PLUGIN_NAME = "llmperf-deadline"


class DeadlinePlugin:
    def __init__(self, deadline: float) -> None:
        self.deadline = deadline
        self.longest_s: float | None = None

    @pytest.hookimpl(tryfirst=True)  # before any fixture starts an engine for the test
    def pytest_runtest_setup(self, item: pytest.Item) -> None:
        reason = left_out_reason(time.time(), self.deadline, self.longest_s)
        if reason:
            pytest.skip(reason)

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_protocol(self, item: pytest.Item, nextitem: pytest.Item | None):
        """A test's whole time, setup (an engine start) and teardown (its stop) included: what
        the next test may take too."""
        started = time.monotonic()
        try:
            return (yield)
        finally:
            took = time.monotonic() - started
            self.longest_s = max(self.longest_s or 0.0, took)
