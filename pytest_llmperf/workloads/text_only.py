"""A workload's prompts as text, for servers that take no token ids (llama.cpp's server refuses a
token-id prompt with HTTP 500: client/server_kind.py).

Synthetic prompts are made as text of exactly their lengths (`prompt_format="text"`,
prompts.text_prompts). Any other source's token-id prompts are decoded and counted again with the
same tokenizer (source.TextOf): decoding random ids and encoding the text need not give the same
ids back (neighbours merge), so a prompt's length is what its text encodes to, not what was
drawn.

The changed source is part of the workload (`Workload.to_dict`), so a baseline made with token-id
prompts is not compared with a run that sent text (verdict/baselines.workload_mismatch).
"""

from __future__ import annotations

from dataclasses import replace

from pytest_llmperf.workloads.source import TextOf
from pytest_llmperf.workloads.workload import Workload

__all__ = ["TextOf", "as_text"]


def as_text(workload: Workload) -> Workload:
    """`workload` with text prompts (its source's `as_text`); itself when its prompts are text
    already (datasets, or prompt_format="text")."""
    source = workload.source.as_text()
    return workload if source is workload.source else replace(workload, source=source)
