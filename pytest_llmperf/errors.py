"""Errors in what a user wrote (a dataset file, a model's config.json), as opposed to faults of
the engine or the plugin. The fixture fails the test with the message alone: it is one line that
names the file, the record or key, and the fix, so a traceback would only bury it."""

from __future__ import annotations


class InputError(ValueError):
    """A file or value the user wrote cannot be used; the message is one line with the fix."""
