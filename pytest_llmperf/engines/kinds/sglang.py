"""SGLang's server (https://github.com/sgl-project/sglang):

    python -m sglang.launch_server --model-path M [flags] --enable-metrics --host H --port P

Flags are python/sglang/srt/server_args.py's (`ServerArgs.add_cli_args`): dashes, switches
that are on when given (False leaves one out). The Engine fields that mean the same there are
spelt as its flags; the rest go in `extra_args` (`{"mem-fraction-static": 0.8}`).
`--enable-metrics` is always added: its GET /metrics (`sglang:` samples) is what the client's
server metrics read (client/metric_names.py, SGLANG_METRICS).

Arguments are checked with SGLang's own parser where `sglang` imports in the engine's
interpreter (`ServerArgs.add_cli_args` on an argparse parser, as `prepare_server_args` builds
it); elsewhere the check says it was not made. Whether its CPU backend serves here is in
docs/engines.md.
"""

from __future__ import annotations

import re
from typing import Any

from pytest_llmperf.engines.kinds.base import (
    KINDS,
    FlagStyle,
    SpecFields,
    extra_flags,
    field_problem_for,
    value_flags,
)
from pytest_llmperf.engines.kinds.parsing import Refusal, RefusingParser, refusal_of

__all__ = ["SGLANG", "SglangKind"]

SERVER_MODULE = "sglang.launch_server"
STYLE = FlagStyle(separator="-", booleans="switch")
# Engine field -> SGLang's flag of the same meaning.
VALUE_FLAGS = {
    "tokenizer": "tokenizer-path",
    "revision": "revision",
    "load_format": "load-format",
    "dtype": "dtype",
    "tensor_parallel_size": "tp-size",
    "pipeline_parallel_size": "pp-size",
    "data_parallel_size": "dp-size",
    "max_model_len": "context-length",
    "max_num_seqs": "max-running-requests",
    "kv_cache_dtype": "kv-cache-dtype",
    "quantization": "quantization",
    "block_size": "page-size",
    "chat_template": "chat-template",
    "served_model_name": "served-model-name",
    "seed": "random-seed",
}
# enable_prefix_caching=False is --disable-radix-cache (SGLang's prefix cache is its radix
# tree, on by default); enforce_eager=True is --disable-cuda-graph.
TAKEN = (*VALUE_FLAGS, "enable_prefix_caching", "enforce_eager")
# SGLang's log prefix: "[2025-06-01 12:00:00 TP0] message" (no level word).
LOG_PREFIX = re.compile(r"^\[\d{4}-\d\d-\d\d [\d:]+(?: [A-Z]+\d+)*\] (?P<level>)")


class SglangKind:
    name = "sglang"
    label = "SGLang"
    noun = "SGLang engine"
    client_kind = "sglang"
    distributions = ("sglang",)
    log_name = "sglang"
    ready_path = "/health"
    dead_status = None
    log_prefix = LOG_PREFIX
    private_dir_env = None
    server_env: dict[str, str] = {}
    model_hint = "a local model directory or a Hugging Face model id"
    offline = False
    arg_checked_by = "sglang.launch_server"

    def field_problem(self, spec: SpecFields) -> str | None:
        return field_problem_for(spec, self.label, TAKEN)

    def server_args(self, spec: Any) -> list[str]:
        args = ["--model-path", spec.model, *value_flags(spec, VALUE_FLAGS, STYLE)]
        if spec.enable_prefix_caching is False:
            args.append("--disable-radix-cache")
        if spec.enforce_eager:
            args.append("--disable-cuda-graph")
        return [*args, *extra_flags(spec, STYLE)]

    def command(self, spec: SpecFields, python: str, host: str, port: int) -> list[str]:
        return [python, "-m", SERVER_MODULE, *self.server_args(spec), "--enable-metrics",
                "--host", host, "--port", str(port)]

    def uses_ray(self, spec: SpecFields) -> bool:
        return False

    def arg_parser(self) -> tuple[dict[str, str], Refusal]:
        """`ServerArgs.add_cli_args` on an argparse parser, as `prepare_server_args` builds it
        (python/sglang/srt/server_args.py)."""
        import sglang
        from sglang.srt.server_args import ServerArgs

        parser = RefusingParser(prog="python -m sglang.launch_server")
        ServerArgs.add_cli_args(parser)
        return {"version": sglang.__version__}, refusal_of(parser.parse_args)



SGLANG = KINDS.register(SglangKind())
