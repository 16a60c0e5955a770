"""What each Engine field accepts, checked when the Engine is written.

A wrong value must fail on the line that wrote it, naming the field and what it takes, not ~15 s
later inside vLLM's start (`max_num_seqs=-5`) or as a bare TypeError deep in `server_args`
(`tensor_parallel_size="2"`). The checks are about form (type and range); whether vLLM supports
a dtype or a quantization method is vLLM's to say, in the start error.
"""

from __future__ import annotations

from collections.abc import Mapping
from numbers import Integral, Real
from typing import Any, Callable

from pytest_llmperf.engines.kinds import KINDS
from pytest_llmperf.metrics.spec_pin import synthetic_problem
from pytest_llmperf.numbers import is_real, is_whole

DEFAULT = ", or None for vLLM's default"

_WHOLE_FROM_1 = ("tensor_parallel_size", "pipeline_parallel_size", "data_parallel_size",
                 "max_model_len", "max_num_seqs", "max_num_batched_tokens",
                 "kv_cache_memory_bytes", "block_size", "max_loras")
_FLAGS = ("enable_prefix_caching", "enable_chunked_prefill", "enforce_eager", "enable_lora")
# What vLLM's --max-lora-rank takes (MaxLoRARanks in vllm/config/lora.py, 0.32.0).
LORA_RANKS = (1, 8, 16, 32, 64, 128, 256, 320, 512)
_SCALARS = (str, Integral, Real)  # bool is an Integral


def _whole(value: Any, minimum: int) -> bool:
    return is_whole(value, minimum)


def _fraction(value: Any) -> bool:
    return is_real(value, maximum=1, above=0)


def _text(value: Any) -> bool:
    return isinstance(value, str) and value.strip() != ""


def _flag_value(value: Any) -> bool:
    """A value of an `extra_args` flag: a scalar, a list of scalars, or a dict (a JSON flag)."""
    if isinstance(value, (list, tuple)):
        return all(isinstance(item, _SCALARS) for item in value)
    return isinstance(value, (*_SCALARS, Mapping))


def _mapping(keys_ok: Callable[[Any], bool], values_ok: Callable[[Any], bool]):
    def check(value: Any) -> bool:
        return isinstance(value, Mapping) and all(
            keys_ok(k) and values_ok(v) for k, v in value.items())

    return check


# field -> (accepts?, what it accepts). A field with no rule here is optional text.
RULES: dict[str, tuple[Callable[[Any], bool], str]] = {
    "kind": (lambda v: isinstance(v, str) and v in KINDS,
             "the server to start: " + ", ".join(map(repr, KINDS)) + " (engines/kinds/)"),
    "model": (_text, "a local model directory or a Hugging Face model id (a non-empty string)"),
    **{name: (lambda v: _whole(v, 1), "a whole number >= 1" + DEFAULT) for name in _WHOLE_FROM_1},
    "seed": (lambda v: _whole(v, 0), "a whole number >= 0" + DEFAULT),
    "gpu_memory_utilization": (_fraction, "a fraction of GPU memory above 0 and at most 1 "
                                          "(e.g. 0.9)" + DEFAULT),
    **{name: (lambda v: isinstance(v, bool), "True or False" + DEFAULT) for name in _FLAGS},
    "speculative_config": (
        lambda v: isinstance(v, Mapping) or (_text(v) and v.lstrip().startswith("{")),
        "a dict (or its JSON string), e.g. {'method': 'ngram', 'num_speculative_tokens': 3}"
        + DEFAULT),
    "structured_outputs_config": (
        lambda v: isinstance(v, Mapping) or (_text(v) and v.lstrip().startswith("{")),
        "a dict (or its JSON string), e.g. {'backend': 'xgrammar'}" + DEFAULT),
    "max_lora_rank": (lambda v: is_whole(v, 1) and v in LORA_RANKS,
                      "one of " + ", ".join(map(str, LORA_RANKS)) + DEFAULT),
    "lora_modules": (_mapping(_text, _text),
                     "a dict of adapter names to PEFT adapter directories, e.g. "
                     "{'sql-lora': '/adapters/sql'}"),
    "extra_args": (_mapping(_text, _flag_value),
                   "a dict of vLLM flag names to values (True for a bare flag, False for "
                   "--no-<flag>, a list for a flag of several values), e.g. "
                   "{'async-scheduling': True}"),
    "env": (_mapping(_text, lambda v: isinstance(v, _SCALARS) and not isinstance(v, bool)),
            "a dict of environment variable names to strings or numbers, e.g. "
            "{'VLLM_CPU_OMP_THREADS_BIND': '0'}"),
}
_OPTIONAL_TEXT = (_text, "a non-empty string" + DEFAULT)


def field_problem(name: str, value: Any) -> str | None:
    """None when `value` suits field `name`; else the one-line error for `Engine(name=value)`
    (the value's repr shows a wrong type: `'2'` is a string)."""
    not_given = () if name in ("extra_args", "env", "lora_modules") else None
    if name not in ("model", "kind") and (value is None or value == not_given):
        return None
    accepts, rule = RULES.get(name, _OPTIONAL_TEXT)
    if not accepts(value):
        return f"Engine({name}={value!r}): expected {rule}"
    # A pinned acceptance out of range: vLLM would say so only once its engine starts.
    return synthetic_problem(value) if name == "speculative_config" else None
