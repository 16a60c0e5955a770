"""What every kind's `arg_parser` shares: a parser that answers instead of exiting, and the one
line of an error it answers with. Runs in --llmperf-check-args' child process
(engines/arg_check_worker.py), the one place a server's package is imported."""

from __future__ import annotations

import argparse
import re
from collections.abc import Callable

__all__ = ["Refusal", "Refused", "RefusingParser", "first_line", "refusal_of"]

# refusal(args) -> None when the server's parser takes `args`, else its first error line.
Refusal = Callable[[list[str]], "str | None"]
# A converter's repr ("<function loads at 0x7f...>") differs from run to run; its name does not.
_ADDRESS = re.compile(r" at 0x[0-9a-f]+>")
# pydantic's first line only counts ("1 validation error for StructuredOutputsConfig"); the
# field and what it takes follow on the next two lines (pydantic_core's ValidationError text).
_PYDANTIC_HEAD = re.compile(r"\d+ validation errors? for \w+$")
_PYDANTIC_TYPE = re.compile(r" \[type=.*$")


class Refused(Exception):
    """What argparse's `error()` would have printed before exiting the process."""


class RefusingParser(argparse.ArgumentParser):
    def error(self, message: str):
        raise Refused(message)


def first_line(exc: BaseException) -> str:
    """The error's first line; for pydantic's count of errors, with the first error's field and
    message (`...: 1 validation error for StructuredOutputsConfig: backend: Input should be
    'auto', ...`)."""
    lines = str(exc).splitlines() or [type(exc).__name__]
    line = lines[0]
    if _PYDANTIC_HEAD.search(line) and len(lines) >= 3:
        line += f": {lines[1].strip()}: {_PYDANTIC_TYPE.sub('', lines[2].strip())}"
    return _ADDRESS.sub(">", line)


def refusal_of(check: Callable[[list[str]], object]) -> Refusal:
    """A refusal from a function that raises on arguments its server would refuse: whatever it
    raises is the refusal, its first line."""
    def refusal(args: list[str]) -> str | None:
        try:
            check(args)
        except Exception as exc:  # the parser's, pydantic's or the server's own words
            return first_line(exc)
        return None
    return refusal
