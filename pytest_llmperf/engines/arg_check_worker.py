"""The child process of engines/arg_check.py: vLLM's `vllm serve` parser, one argument list a line.

    python -m pytest_llmperf.engines.arg_check_worker

Prints {"vllm": "<version>"} once the parser is built, then for each JSON list of arguments on
stdin one line {"refusal": null} (accepted) or {"refusal": "<vLLM's error>"}; ends at the end
of its input. The parser is the one the server builds for itself
(`vllm.entrypoints.launchers.api_server.entry.main`): `make_arg_parser` on a
`FlexibleArgumentParser`, then `validate_parsed_serve_args`; only argparse's exit on an error is
turned into an answer. vLLM takes any string for `--quantization` and refuses an unknown method
only when it builds the model config (`ModelConfig._verify_quantization`: "Unknown quantization
method: ..."), so that check is made here too, from the same list.
"""

from __future__ import annotations

import json
import os
import re
import sys
from typing import Any

# A converter's repr ("<function loads at 0x7f...>") differs from run to run; its name does not.
_ADDRESS = re.compile(r" at 0x[0-9a-f]+>")


class _Refused(Exception):
    """What argparse's `error()` would have printed before exiting the process."""


def _build() -> tuple[Any, Any, tuple[str, ...], str]:
    import vllm
    from vllm.entrypoints.launchers.cli_args import make_arg_parser, validate_parsed_serve_args
    from vllm.model_executor.layers.quantization import QUANTIZATION_METHODS
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    class RefusingParser(FlexibleArgumentParser):
        def error(self, message: str):
            raise _Refused(message)

    parser = make_arg_parser(RefusingParser(prog="vllm serve"))
    return parser, validate_parsed_serve_args, tuple(QUANTIZATION_METHODS), vllm.__version__


def refusal(parser: Any, validate: Any, quantization_methods: tuple[str, ...],
            args: list[str]) -> str | None:
    """vLLM's first error line for `args`, or None when `vllm serve` would take them."""
    try:
        parsed = parser.parse_args(args)
        validate(parsed)
    except Exception as exc:  # whatever vLLM's parser or validation raises is a refusal
        return _ADDRESS.sub(">", (str(exc).splitlines() or [type(exc).__name__])[0])
    quantization = getattr(parsed, "quantization", None)
    if quantization is not None and quantization not in quantization_methods:
        # ModelConfig._verify_quantization's words, the flag named as argparse names it.
        return (f"argument --quantization/-q: Unknown quantization method: {quantization}. "
                f"Must be one of {list(quantization_methods)}.")
    return None


def main() -> None:
    # The answers get their own copy of stdout; whatever vLLM or a library under it prints to
    # stdout (fd 1) goes to stderr instead, so no stray line is read as an answer.
    answers = os.fdopen(os.dup(1), "w", encoding="utf-8")
    os.dup2(2, 1)
    parser, validate, methods, version = _build()
    print(json.dumps({"vllm": version}), file=answers, flush=True)
    for line in sys.stdin:
        if line.strip():
            answer = refusal(parser, validate, methods, json.loads(line))
            print(json.dumps({"refusal": answer}), file=answers, flush=True)


if __name__ == "__main__":
    main()
