"""The child process of engines/arg_check.py: a kind's own server parser, one argument list a line.

    python -m pytest_llmperf.engines.arg_check_worker [--kind sglang]

Prints its hello once the parser is built ({"vllm": "<version>"} for vLLM, the default kind;
{"version": "<version>"} for another), then for each JSON list of arguments on stdin one line
{"refusal": null} (accepted) or {"refusal": "<the server's error>"}; ends at the end of its
input. Where another kind's package does not import here, the hello is
{"unavailable": "<the import error>"} and the child ends: that kind is checked only where it is
installed. vLLM not importing ends the child with its error (the parent says so in one line).

Each kind's parser is built here, the one place that imports a server's package, never in the
test process (engines/kinds/ stays plain data):
- vLLM: the parser the server builds for itself (`vllm.entrypoints.launchers.api_server.entry
  .main`): `make_arg_parser` on a `FlexibleArgumentParser`, then `validate_parsed_serve_args`.
  vLLM takes any string for `--quantization` and refuses an unknown method only when it builds
  the model config (`ModelConfig._verify_quantization`: "Unknown quantization method: ..."), so
  that check is made here too, from the same list.
- llama.cpp's server: llama_cpp/server/__main__.py's parser (`add_args_from_model` over its
  Settings), then the ServerSettings and ModelSettings it validates them into.
- SGLang: `ServerArgs.add_cli_args` on an argparse parser, as `prepare_server_args` builds it
  (python/sglang/srt/server_args.py).
- TensorRT-LLM: the `serve` click command's `make_context`, which parses and converts every
  option without running the command (tensorrt_llm/commands/serve.py).
Only argparse's exit on an error is turned into an answer.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import os
import re
import sys
from collections.abc import Callable
from typing import Any

from pytest_llmperf.engines.kinds import DEFAULT

# refusal(args) -> None when the server's parser takes `args`, else its first error line.
Refusal = Callable[[list[str]], "str | None"]
# A converter's repr ("<function loads at 0x7f...>") differs from run to run; its name does not.
_ADDRESS = re.compile(r" at 0x[0-9a-f]+>")


class _Refused(Exception):
    """What argparse's `error()` would have printed before exiting the process."""


class _RefusingParser(argparse.ArgumentParser):
    def error(self, message: str):
        raise _Refused(message)


def _first_line(exc: BaseException) -> str:
    return _ADDRESS.sub(">", (str(exc).splitlines() or [type(exc).__name__])[0])


def refusal(parser: Any, validate: Any, quantization_methods: tuple[str, ...],
            args: list[str]) -> str | None:
    """vLLM's first error line for `args`, or None when `vllm serve` would take them."""
    try:
        parsed = parser.parse_args(args)
        validate(parsed)
    except Exception as exc:  # whatever vLLM's parser or validation raises is a refusal
        return _first_line(exc)
    quantization = getattr(parsed, "quantization", None)
    if quantization is not None and quantization not in quantization_methods:
        # ModelConfig._verify_quantization's words, the flag named as argparse names it.
        return (f"argument --quantization/-q: Unknown quantization method: {quantization}. "
                f"Must be one of {list(quantization_methods)}.")
    return None


def _vllm() -> tuple[dict[str, str], Refusal]:
    import vllm
    from vllm.entrypoints.launchers.cli_args import make_arg_parser, validate_parsed_serve_args
    from vllm.model_executor.layers.quantization import QUANTIZATION_METHODS
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    class RefusingParser(FlexibleArgumentParser):
        def error(self, message: str):
            raise _Refused(message)

    parser = make_arg_parser(RefusingParser(prog="vllm serve"))
    methods = tuple(QUANTIZATION_METHODS)
    return ({"vllm": vllm.__version__},
            lambda args: refusal(parser, validate_parsed_serve_args, methods, args))


def _llamacpp() -> tuple[dict[str, str], Refusal]:
    from llama_cpp.server.cli import add_args_from_model, parse_model_from_args
    from llama_cpp.server.settings import ModelSettings, ServerSettings, Settings

    parser = _RefusingParser(prog="python -m llama_cpp.server")
    add_args_from_model(parser, Settings)
    parser.add_argument("--config_file", type=str)

    def check(args: list[str]) -> str | None:
        try:
            parsed = parser.parse_args(args)
            parse_model_from_args(ServerSettings, parsed)
            parse_model_from_args(ModelSettings, parsed)
        except Exception as exc:  # the parser's or pydantic's words
            return _first_line(exc)
        return None

    return {"version": importlib.metadata.version("llama_cpp_python")}, check


def _sglang() -> tuple[dict[str, str], Refusal]:
    import sglang
    from sglang.srt.server_args import ServerArgs

    parser = _RefusingParser(prog="python -m sglang.launch_server")
    ServerArgs.add_cli_args(parser)

    def check(args: list[str]) -> str | None:
        try:
            parser.parse_args(args)
        except Exception as exc:
            return _first_line(exc)
        return None

    return {"version": sglang.__version__}, check


def _trtllm() -> tuple[dict[str, str], Refusal]:
    from tensorrt_llm.commands.serve import serve

    def check(args: list[str]) -> str | None:
        try:
            serve.make_context("trtllm-serve", list(args))
        except Exception as exc:  # click's UsageError / BadParameter
            format_message = getattr(exc, "format_message", None)
            text = format_message() if callable(format_message) else str(exc)
            return (text.splitlines() or [type(exc).__name__])[0]
        return None

    return {"version": importlib.metadata.version("tensorrt_llm")}, check


# Each kind's parser (engines/kinds/<kind>.py names the command it checks as).
PARSERS: dict[str, Callable[[], tuple[dict[str, str], Refusal]]] = {
    "vllm": _vllm, "llamacpp": _llamacpp, "sglang": _sglang, "trtllm": _trtllm}


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
    if name not in PARSERS:
        _unavailable(answers, f"no {name} parser in pytest_llmperf.engines.arg_check_worker")
        return
    try:
        hello, check = PARSERS[name]()
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
