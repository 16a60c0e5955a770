"""The child process of engines/arg_check.py: a kind's own server parser, one argument list a line.

    python -m pytest_llmperf.engines.arg_check_worker [--kind sglang]

Prints its hello once the parser is built ({"vllm": "<version>"} for vLLM, the default kind;
{"version": "<version>"} for another), then for each JSON list of arguments on stdin one line
{"refusal": null} (accepted) or {"refusal": "<the server's error>"}; ends at the end of its
input. Where another kind's package does not import here, the hello is
{"unavailable": "<the import error>"} and the child ends: that kind is checked only where it is
installed. vLLM not importing ends the child with its error (the parent says so in one line).

Each kind builds its own parser (`arg_parser` in engines/kinds/<kind>.py, which imports the
server's package inside the method): this child is the one process that calls it, never the
test process.
"""

from __future__ import annotations

import json
import os
import sys

from pytest_llmperf.engines.kinds import DEFAULT, KINDS


def _kind_name(argv: list[str]) -> str:
    return argv[argv.index("--kind") + 1] if "--kind" in argv else DEFAULT


def _unavailable(answers, why: str) -> None:
    print(json.dumps({"unavailable": why}), file=answers, flush=True)


def main(argv: list[str] | None = None) -> None:
    # The answers get their own copy of stdout; whatever the server's package or a library
    # under it prints to stdout (fd 1) goes to stderr instead, so no stray line is read as an
    # answer.
    answers = os.fdopen(os.dup(1), "w", encoding="utf-8")
    os.dup2(2, 1)
    name = _kind_name(sys.argv[1:] if argv is None else argv)
    if name not in KINDS:
        _unavailable(answers, f"no engine kind {name!r} here (kinds: {', '.join(KINDS)})")
        return
    try:
        hello, check = KINDS[name].arg_parser()
    except ImportError as exc:
        if name == DEFAULT:
            raise
        _unavailable(answers, f"{type(exc).__name__}: {exc}")
        return
    print(json.dumps(hello), file=answers, flush=True)
    for line in sys.stdin:
        if line.strip():
            print(json.dumps({"refusal": check(json.loads(line))}), file=answers, flush=True)


if __name__ == "__main__":
    main()
