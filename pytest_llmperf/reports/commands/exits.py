"""What every command here exits with, and the input error `llmperf`'s `main` prints as one line
(`llmperf: error: ...`, exit 2) instead of a traceback."""

from __future__ import annotations

from pytest_llmperf.errors import InputError

__all__ = ["EXIT_OK", "EXIT_REGRESSION", "EXIT_USAGE", "CliError"]

EXIT_OK, EXIT_REGRESSION, EXIT_USAGE = 0, 1, 2


class CliError(InputError):
    """Input the command cannot use; the message is one line with the fix."""
