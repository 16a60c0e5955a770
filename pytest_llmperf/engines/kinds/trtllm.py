"""TensorRT-LLM's OpenAI-compatible server, `trtllm-serve` (https://github.com/NVIDIA/TensorRT-LLM,
tensorrt_llm/commands/serve.py):

    python -m tensorrt_llm.commands.serve serve M [flags] --host H --port P

Flags are its click options: underscores (`--tp_size`, `--max_batch_size`), switches that are
on when given (False leaves one out). The Engine fields that mean the same there are spelt as
its flags; the rest go in `extra_args`, or in a YAML file named by `--extra_llm_api_options`.
It answers GET /health and GET /version; its GET /metrics is JSON iteration statistics, not
Prometheus text, so no server metrics are read from it (docs/engines.md).

Argument checking only where tensorrt_llm imports: the check runs the `serve` command's own click
parser (`serve.make_context`, which parses and converts every option without calling the
command). TensorRT-LLM installs only with CUDA, so on a CPU machine the check says it was not
made.
"""

from __future__ import annotations

from typing import Any

from pytest_llmperf.engines.kinds.base import (
    KINDS,
    FlagStyle,
    SpecFields,
    extra_flags,
    field_problem_for,
    value_flags,
)
from pytest_llmperf.engines.kinds.parsing import Refusal

__all__ = ["TRTLLM", "TrtLlmKind"]

SERVER_MODULE = "tensorrt_llm.commands.serve"
STYLE = FlagStyle(separator="_", booleans="switch")
# Engine field -> trtllm-serve's option of the same meaning.
VALUE_FLAGS = {
    "tokenizer": "tokenizer",
    "revision": "revision",
    "tensor_parallel_size": "tp_size",
    "pipeline_parallel_size": "pp_size",
    "max_model_len": "max_seq_len",
    "max_num_seqs": "max_batch_size",
    "max_num_batched_tokens": "max_num_tokens",
    "chat_template": "chat_template",
}
TAKEN = (*VALUE_FLAGS, "enable_chunked_prefill")


class TrtLlmKind:
    name = "trtllm"
    label = "TensorRT-LLM"
    noun = "TensorRT-LLM engine"
    client_kind = "openai"  # OpenAI's request fields only (client/server_kind.py)
    distributions = ("tensorrt_llm", "tensorrt-llm")
    log_name = "trtllm"
    ready_path = "/health"
    dead_status = None
    log_prefix = None
    private_dir_env = None
    server_env: dict[str, str] = {}
    model_hint = "a local checkpoint or engine directory or a Hugging Face model id"
    offline = False
    arg_checked_by = "trtllm-serve"

    def field_problem(self, spec: SpecFields) -> str | None:
        return field_problem_for(spec, self.label, TAKEN)

    def server_args(self, spec: Any) -> list[str]:
        args = [spec.model, *value_flags(spec, VALUE_FLAGS, STYLE)]
        if spec.enable_chunked_prefill:
            args.append("--enable_chunked_prefill")
        return [*args, *extra_flags(spec, STYLE)]

    def command(self, spec: SpecFields, python: str, host: str, port: int) -> list[str]:
        return [python, "-m", SERVER_MODULE, "serve", *self.server_args(spec),
                "--host", host, "--port", str(port)]

    def uses_ray(self, spec: SpecFields) -> bool:
        return False

    def arg_parser(self) -> tuple[dict[str, str], Refusal]:
        """The `serve` click command's `make_context`, which parses and converts every option
        without running the command (tensorrt_llm/commands/serve.py)."""
        import importlib.metadata

        from tensorrt_llm.commands.serve import serve

        def refusal(args: list[str]) -> str | None:
            try:
                serve.make_context("trtllm-serve", list(args))
            except Exception as exc:  # click's UsageError / BadParameter
                format_message = getattr(exc, "format_message", None)
                text = format_message() if callable(format_message) else str(exc)
                return (text.splitlines() or [type(exc).__name__])[0]
            return None

        return {"version": importlib.metadata.version("tensorrt_llm")}, refusal



TRTLLM = KINDS.register(TrtLlmKind())
