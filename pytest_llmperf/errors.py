"""Every error pytest-llmperf raises on purpose derives from `LlmperfError`, and its message is
one line that names the thing and the fix: the plugin fails the test with the message alone, as a
traceback would only bury it.

- `InputError`: what a user wrote cannot be used (an Engine or Workload argument, a dataset, a
  model's config.json, a baseline or run file, a metric name). A ValueError too, so code that
  checks arguments the usual way still catches it.
- `engines.errors.EngineError`: an engine could not serve a test (did not start, died, stalled).
- `Disturbed`: a measurement a neighbour had already made DISTURBED was ended early
  (machine/neighbour_watch.py); what it measured is kept.
"""

from __future__ import annotations

__all__ = ["Disturbed", "InputError", "LlmperfError"]


class LlmperfError(Exception):
    """The root of pytest-llmperf's errors; the message is one line with the fix."""


class InputError(LlmperfError, ValueError):
    """A file or value the user wrote cannot be used; the message is one line with the fix."""


class Disturbed(LlmperfError):
    """A neighbour had already made a measurement DISTURBED, and it was ended early; the
    message is the test's one line."""
