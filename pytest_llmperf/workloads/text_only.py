"""A workload's prompts as text, for servers that take no token ids (llama.cpp's server refuses a
token-id prompt with HTTP 500: client/server_kind.py).

Synthetic prompts are made as text of exactly their lengths (`prompt_format="text"`,
prompts.text_prompts). Any other source's token-id prompts are decoded and counted again with the
same tokenizer: decoding random ids and encoding the text need not give the same ids back
(neighbours merge), so a prompt's length is what its text encodes to, not what was drawn.

The changed source is part of the workload (`Workload.to_dict`), so a baseline made with token-id
prompts is not compared with a run that sent text (verdict/baselines.workload_mismatch).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from pytest_llmperf.records import Request
from pytest_llmperf.workloads.prompts import Tokenizer
from pytest_llmperf.workloads.workload import DatasetSource, Workload

__all__ = ["TextOf", "as_text"]


@dataclass(frozen=True, kw_only=True)
class TextOf:
    """`source`'s requests with every token-id prompt decoded to text."""

    source: Any

    def requests(self, n, tokenizer: Tokenizer, rng) -> list[Request]:
        return [_decoded(request, tokenizer)
                for request in self.source.requests(n, tokenizer, rng)]


def as_text(workload: Workload) -> Workload:
    """`workload` with text prompts; itself when its prompts are text already (datasets, or
    prompt_format="text")."""
    source = workload.source
    if getattr(source, "prompt_format", None) == "token_ids":
        return replace(workload, source=replace(source, prompt_format="text"))
    if getattr(source, "prompt_format", None) == "text" or isinstance(source,
                                                                      (DatasetSource, TextOf)):
        return workload
    return replace(workload, source=TextOf(source=source))


def _decoded(request: Request, tokenizer: Tokenizer) -> Request:
    if isinstance(request.prompt, str):
        return request
    text = tokenizer.decode(request.prompt)
    return replace(request, prompt=text, prompt_tokens=len(tokenizer.encode(text)))
