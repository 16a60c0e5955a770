"""The engine specification: what to start, as data.

An `Engine` is frozen and hashable so it can key the session's engine cache and order tests.
`kind` names the server (engines/kinds/: vLLM by default, llama.cpp's server, SGLang,
TensorRT-LLM); the other fields use vLLM's argument names, and each kind spells the ones it takes
as its own flags (`server_args()`), so what a user reads in a failing test is what they would
type by hand. A field a kind has no use for is a one-line error where the spec is written.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any, Mapping

from pytest_llmperf import secrets
from pytest_llmperf.engines.field_rules import field_problem
from pytest_llmperf.engines.kinds import DEFAULT, EngineKind, kind_named
from pytest_llmperf.engines.kinds.base import is_pairs, thaw_pairs
from pytest_llmperf.errors import InputError
from pytest_llmperf.metrics.gpus import Parallelism
from pytest_llmperf.numbers import is_whole

__all__ = ["Engine", "is_pairs", "thaw_pairs"]


# Fields that take dicts, stored as sorted tuples so an Engine stays hashable.
FROZEN = ("speculative_config", "structured_outputs_config", "lora_modules", "extra_args", "env")


def _freeze(value: Any) -> Any:
    """Turn dicts and lists into tuples so an Engine stays hashable."""
    if isinstance(value, Mapping):
        return tuple(sorted((str(k), _freeze(v)) for k, v in value.items()))
    if isinstance(value, (list, tuple)):
        return tuple(_freeze(v) for v in value)
    return value


@dataclass(frozen=True, kw_only=True)
class Engine:
    """An engine configuration. `None` means "the server's default".

    The fields of FROZEN accept dicts; they are stored frozen (sorted tuples) so the spec stays
    hashable. `extra_args` maps vLLM flag names (dashes or underscores, without the
    leading `--`) to values; `True` means a bare flag, `False` means `--no-<flag>`.
    """

    model: str
    # A branch, tag or commit of a Hugging Face Hub model (vLLM's --revision; its tokenizer's
    # too, as vLLM's --tokenizer-revision defaults to it). Ignored for a local directory.
    revision: str | None = None
    tokenizer: str | None = None
    load_format: str | None = None
    dtype: str | None = None
    tensor_parallel_size: int | None = None
    pipeline_parallel_size: int | None = None
    # Copies of the model behind one API server, each on TP x PP GPUs of its own (vLLM's
    # --data-parallel-size): 8 x TP=1 against TP=8 is the same 8 GPUs used two ways.
    data_parallel_size: int | None = None
    max_model_len: int | None = None
    max_num_seqs: int | None = None
    max_num_batched_tokens: int | None = None
    gpu_memory_utilization: float | None = None
    kv_cache_memory_bytes: int | None = None
    kv_cache_dtype: str | None = None
    quantization: str | None = None
    block_size: int | None = None
    enable_prefix_caching: bool | None = None
    enable_chunked_prefill: bool | None = None
    enforce_eager: bool | None = None
    speculative_config: Any = None
    # vLLM's --structured-outputs-config, as a dict (or its JSON): the grammar backend and its
    # options, e.g. {"backend": "xgrammar", "disable_any_whitespace": True} (docs/workloads.md,
    # "Structured outputs").
    structured_outputs_config: Any = None
    # LoRA adapters served beside the model, each under its name (vLLM's --enable-lora,
    # --lora-modules, --max-loras, --max-lora-rank; docs/workloads.md, "LoRA adapters"):
    # `lora_modules` maps a name to a PEFT adapter directory and turns LoRA on by itself.
    enable_lora: bool | None = None
    lora_modules: Any = field(default=())
    max_loras: int | None = None
    max_lora_rank: int | None = None
    distributed_executor_backend: str | None = None
    chat_template: str | None = None
    # The parser that splits a reasoning model's thinking from its answer (vLLM's
    # --reasoning-parser, e.g. "deepseek_r1"): what Workload.reasoning needs
    # (docs/workloads.md, "Reasoning").
    reasoning_parser: str | None = None
    served_model_name: str | None = None
    seed: int | None = None
    extra_args: Any = field(default=())
    # Environment variables for the server process (e.g. VLLM_CPU_OMP_THREADS_BIND).
    env: Any = field(default=())
    # The interpreter of another vLLM install to run this engine with (default: this one), so an
    # A/B run can put two vLLM versions side by side: python="/opt/vllm-next/bin/python".
    python: str | None = None
    # The server (engines/kinds/): "vllm", "llamacpp", "sglang" or "trtllm". Last, and left out
    # of to_dict() when vLLM, so a vLLM spec's recorded identity is what it was before kinds.
    kind: str = DEFAULT

    def __post_init__(self) -> None:
        for f in fields(self):  # every field, where it is written (see field_rules.py)
            problem = field_problem(f.name, getattr(self, f.name))
            if problem:
                raise InputError(problem)
        for name in FROZEN:
            object.__setattr__(self, name, _freeze(getattr(self, name)))
        problem = self.engine_kind.field_problem(self)
        if problem:
            raise InputError(problem)

    @property
    def engine_kind(self) -> EngineKind:
        """What this spec's kind of server is and does (engines/kinds/)."""
        return kind_named(self.kind)

    @property
    def gpus_needed(self) -> int:
        """GPUs one instance of this engine occupies (TP x PP x DP): metrics/gpus.py counts them,
        from a recorded spec as from this one."""
        return Parallelism(self.tensor_parallel_size or 1, self.pipeline_parallel_size or 1,
                           self.data_parallel_size or 1).gpus

    @property
    def model_name(self) -> str:
        """The name requests must use: vLLM serves the model under its path unless renamed."""
        return self.served_model_name or self.model

    def replace(self, **changes: Any) -> "Engine":
        """A copy with some fields changed (dataclasses.replace, re-frozen)."""
        current = {f.name: getattr(self, f.name) for f in fields(self)}
        for name in FROZEN:
            current[name] = thaw_pairs(current[name]) if is_pairs(current[name]) else current[name]
        current.update(changes)
        return Engine(**current)

    def server_args(self) -> list[str]:
        """The server's flags for this spec (without host and port, which the server picks):
        `vllm serve`'s for a vLLM spec."""
        return self.engine_kind.server_args(self)

    def digest(self) -> str:
        """A short name for this spec that is the same in every process (hash() is not)."""
        text = json.dumps(self.to_dict(), sort_keys=True, default=str)
        return hashlib.sha1(text.encode()).hexdigest()[:10]

    def environment(self) -> dict[str, str]:
        return {k: str(v) for k, v in self.env}

    def to_dict(self) -> dict[str, Any]:
        """Only the fields that differ from the defaults: what a baseline records (the kind
        only when it is not vLLM)."""
        out: dict[str, Any] = {}
        for key, value in asdict(self).items():
            if value is None or value == () or (key == "kind" and value == DEFAULT):
                continue
            out[key] = thaw_pairs(value) if is_pairs(value) else value
        return out

    def shown(self) -> dict[str, Any]:
        """`to_dict()` as written out (baselines, run files, labels, repr): secret `env` and
        `extra_args` values replaced by secrets.MARKER. `digest()` keeps the real values, so a
        changed token is still another engine process, never another recorded engine."""
        out = self.to_dict()
        for name in ("env", "extra_args"):
            if name in out:
                out[name] = secrets.redact_env(out[name])
        return out

    def secret_values(self) -> set[str]:
        """The values `shown()` hides, to find them again in text we did not write (a log)."""
        return (secrets.secret_values(self.environment())
                | secrets.secret_values(thaw_pairs(self.extra_args)))

    def label(self) -> str:
        """A short name for tables: the model's last path part (the summary's engine column),
        then the kind when it is not vLLM, then what is not default
        ("tiny-llama-f32.gguf llamacpp len=2048")."""
        parts = [Path(self.model).name or self.model]
        if self.kind != DEFAULT:
            parts.append(self.kind)
        for key, value in self.shown().items():
            if key in ("model", "env", "tokenizer", "chat_template", "served_model_name",
                       "python", "kind"):
                continue
            shown = ",".join(value) if key == "lora_modules" else _short_value(value)
            parts.append(f"{_SHORT.get(key, key)}={shown}")
        return " ".join(parts)

    def __repr__(self) -> str:
        """The fields that are set, secrets hidden: a repr lands in tracebacks (pytest's
        --showlocals) and in the user's own prints."""
        fields_set = ", ".join(f"{key}={value!r}" for key, value in self.shown().items())
        return f"Engine({fields_set})"


_SHORT = {
    "tensor_parallel_size": "tp",
    "pipeline_parallel_size": "pp",
    "data_parallel_size": "dp",
    "max_num_seqs": "seqs",
    "max_num_batched_tokens": "batched",
    "max_model_len": "len",
    "kv_cache_memory_bytes": "kv",
    "kv_cache_dtype": "kv_dtype",
    "enable_prefix_caching": "prefix_cache",
    "enable_chunked_prefill": "chunked",
    "gpu_memory_utilization": "mem",
    "load_format": "load",
    "enforce_eager": "eager",
    "speculative_config": "spec",
    "structured_outputs_config": "structured",
    "revision": "rev",
    "lora_modules": "lora",
}


def _short_value(value: Any) -> str:
    if is_whole(value, 1 << 20):
        return f"{value / (1 << 20):.0f}MiB"
    if isinstance(value, dict):
        return ",".join(f"{k}:{v}" for k, v in value.items())
    return str(value)

