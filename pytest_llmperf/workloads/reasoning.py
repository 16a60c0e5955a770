"""Reasoning: chat requests to a model that thinks before it answers, its thinking and its
answer timed and counted apart (metrics/reasoning.py).

A vLLM server started with `--reasoning-parser` (the Engine's `reasoning_parser`, e.g.
"deepseek_r1") streams a reasoning model's thinking in the chat delta's `reasoning` field and its
answer in `content` (vLLM 0.32.0: DeltaMessage in vllm/entrypoints/generate/base/protocol.py;
`reasoning_content` before 0.11, which the client reads too). The "deepseek_r1" parser splits the
output at the `<think>` and `</think>` tokens of the model's vocabulary
(vllm/reasoning/basic_parsers.py, BaseThinkingReasoningParser): a chunk of only one of those
tokens carries neither field, and the tokens between them are the thinking
(https://github.com/vllm-project/vllm/tree/v0.32.0/vllm/reasoning). Without a parser the server
streams the thinking as `content`: the answer would start at the first thought, which is what a
reasoning workload refuses to measure (check_reasoning).

The output length is forced as for any request (min_tokens = max_tokens): `output_tokens` is the
thinking and the answer together.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from pytest_llmperf.engines.kinds import DEFAULT
from pytest_llmperf.errors import InputError
from pytest_llmperf.records import Request
from pytest_llmperf.workloads.source import PromptFormat, Source

__all__ = ["ReasoningOf", "check_reasoning", "parser_of"]

WHERE = "Workload.reasoning"


@dataclass(frozen=True, kw_only=True)
class ReasoningOf(Source):
    """`source`'s requests, each a reasoning request (Request.reasoning): its record counts the
    streamed thinking and the answer apart. The source's prompts must be text (a chat's)."""

    source: Source

    @property
    def prompt_format(self) -> PromptFormat:  # type: ignore[override]
        return self.source.prompt_format

    def requests(self, n: int, tokenizer: Any, rng: np.random.Generator) -> list[Request]:
        return [replace(request, reasoning=True)
                for request in self.source.requests(n, tokenizer, rng)]


def parser_of(engine: Any) -> str | None:
    """The reasoning parser a vLLM engine spec starts its server with: its `reasoning_parser`,
    else a `reasoning-parser` in its extra_args; None without one."""
    if getattr(engine, "reasoning_parser", None):
        return engine.reasoning_parser
    for name, value in getattr(engine, "extra_args", ()):
        if name.replace("_", "-") == "reasoning-parser" and value:
            return str(value)
    return None


def check_reasoning(engine: Any, workload_name: str, source: Source) -> None:
    """InputError, one line naming the workload, the engine's model and the fix, when a
    reasoning workload is measured on a vLLM engine that runs no reasoning parser (its thinking
    would stream as the answer); nothing for another workload or another kind of server."""
    if not isinstance(source, ReasoningOf) or engine.kind != DEFAULT or parser_of(engine):
        return
    raise InputError(
        f"Workload {workload_name!r} is a reasoning workload, but the engine of model "
        f"{engine.model} runs no reasoning parser, so its thinking would stream as the answer: "
        "give the Engine reasoning_parser='deepseek_r1' (or the parser of its model family; "
        "vLLM's --reasoning-parser)")
