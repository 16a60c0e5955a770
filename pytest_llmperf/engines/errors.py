"""The ways an engine lets a test down, each told in one line that ends with where to look.

The fixture turns any `EngineError` into that test's failure (`pytest.fail(..., pytrace=False)`),
never a traceback and never the end of the session.
"""

from __future__ import annotations

from pytest_llmperf.errors import LlmperfError


class EngineError(LlmperfError, RuntimeError):
    """An engine could not serve a test. The message is one line."""


class EngineStartError(EngineError):
    """The engine did not start or run. The message ends with the log path."""


class EngineDied(EngineError):
    """The engine died while it served (or between tests). The message names how it died, its
    last telling log lines and the log path."""


class EngineStalled(EngineDied):
    """The engine stopped answering while requests were in flight (the stall watchdog); it was
    killed like a dead one. The message names the stall, the engine's state and its log."""
