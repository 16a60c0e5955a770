"""llama.cpp's server as llama-cpp-python runs it (the `llamacpp` extra):

    python -m llama_cpp.server --model M.gguf [flags] --host H --port P

Its flags are the fields of llama_cpp/server/settings.py's ModelSettings and ServerSettings,
underscores kept (`--n_ctx`, `--n_threads`), booleans given as values (`--interrupt_requests
False`): `python -m llama_cpp.server --help`. The Engine fields that mean the same there are
spelt as its flags; the rest of its flags go in `extra_args`.

It is one process (uvicorn serving the model in-process), with no /health route: GET /v1/models
answers once the model is loaded (the app loads it before it listens), and a dead server is a
process that ended. It has no GET /metrics and no GET /version (docs/engines.md).

A .gguf file carries its own tokenizer, which the client cannot count prompts with, so
`tokenizer` is needed: the Hugging Face tokenizer the test's prompts are made and counted with
(suites/models/tiny-llama for scripts/tiny_gguf.py's file). It is the client's, not a flag.
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
from pytest_llmperf.engines.kinds.parsing import Refusal, RefusingParser, refusal_of

__all__ = ["LLAMACPP", "LlamaCppKind"]

SERVER_MODULE = "llama_cpp.server"
STYLE = FlagStyle(separator="_", booleans="value")
# Engine field -> llama-cpp-python's flag of the same meaning.
VALUE_FLAGS = {
    "max_model_len": "n_ctx",  # the context size
    "max_num_batched_tokens": "n_batch",  # the most tokens one eval call takes
    "seed": "seed",
    "served_model_name": "model_alias",
}
TAKEN = ("tokenizer", *VALUE_FLAGS)


class LlamaCppKind:
    name = "llamacpp"
    label = "llama.cpp's server"
    noun = "llama.cpp server"
    client_kind = "llamacpp"
    distributions = ("llama_cpp_python", "llama-cpp-python")
    log_name = "llamacpp"
    ready_path = "/v1/models"
    dead_status = None  # one process: when it answers at all, it serves
    log_prefix = None
    private_dir_env = None
    server_env: dict[str, str] = {}
    model_hint = "a GGUF file (scripts/tiny_gguf.py makes a tiny one)"
    offline = False
    arg_checked_by = "llama_cpp.server"

    def field_problem(self, spec: SpecFields) -> str | None:
        problem = field_problem_for(spec, self.label, TAKEN)
        if problem is None and getattr(spec, "tokenizer", None) is None:
            return (f"Engine(kind='llamacpp', model={spec.model!r}): tokenizer= is needed: "
                    "the prompts are made and counted with a Hugging Face tokenizer, and a GGUF "
                    "file is none; name the model's tokenizer directory or Hub id")
        return problem

    def server_args(self, spec: Any) -> list[str]:
        args = ["--model", spec.model, *value_flags(spec, VALUE_FLAGS, STYLE)]
        return [*args, *extra_flags(spec, STYLE)]

    def command(self, spec: SpecFields, python: str, host: str, port: int) -> list[str]:
        return [python, "-m", SERVER_MODULE, *self.server_args(spec),
                "--host", host, "--port", str(port)]

    def uses_ray(self, spec: SpecFields) -> bool:
        return False

    def arg_parser(self) -> tuple[dict[str, str], Refusal]:
        """llama_cpp/server/__main__.py's parser (`add_args_from_model` over its Settings), then
        the ServerSettings and ModelSettings it validates them into."""
        import importlib.metadata

        from llama_cpp.server.cli import add_args_from_model, parse_model_from_args
        from llama_cpp.server.settings import ModelSettings, ServerSettings, Settings

        parser = RefusingParser(prog="python -m llama_cpp.server")
        add_args_from_model(parser, Settings)
        parser.add_argument("--config_file", type=str)

        def check(args: list[str]) -> None:
            parsed = parser.parse_args(args)
            parse_model_from_args(ServerSettings, parsed)
            parse_model_from_args(ModelSettings, parsed)

        return ({"version": importlib.metadata.version("llama_cpp_python")},
                refusal_of(check))



LLAMACPP = KINDS.register(LlamaCppKind())
