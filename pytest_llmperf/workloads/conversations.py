"""Multi-turn conversations: the new message of every turn of every session, as token ids or
as text (`prompt_format="text"`: for chat conversations, and servers that take no token ids).

The prompt a turn actually sends (the conversation so far, the server's earlier answers
included) exists only at run time; client/sessions.py builds it. What is drawn here, seeded, is
each turn's new user message and its forced output length, laid out session-major (request
s * turns + t is session s's turn t + 1), which is the layout the session driver reads.
Conversations read from files are conversation_files.py's.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from pytest_llmperf.records import Request
from pytest_llmperf.workloads import lengths, prompts
from pytest_llmperf.workloads.source import Source


@dataclass(frozen=True, kw_only=True)
class ConversationSource(Source):
    """`sessions` conversations of `turns` turns; each turn's new message `input_tokens` long
    and its answer `output_tokens` (lengths.Fixed, Uniform, Normal); the messages random token
    ids, or text of exactly those lengths (prompts.text_prompts: it needs a real tokenizer)."""

    sessions: int
    turns: int
    input_tokens: Any
    output_tokens: Any
    prompt_format: Literal["token_ids", "text"] = "token_ids"

    def requests(self, n: int, tokenizer: Any, rng: np.random.Generator) -> list[Request]:
        inputs = self.input_tokens.sample(rng, n)
        outputs = self.output_tokens.sample(rng, n)
        if self.prompt_format == "text":
            return prompts.make_requests(prompts.text_prompts(inputs, tokenizer, rng), outputs)
        return prompts.make_requests(prompts.token_id_prompts(inputs, tokenizer, rng), outputs)


def as_distribution(value: Any) -> Any:
    """An int is an exact length; a distribution stays as it is."""
    return lengths.Fixed(tokens=value) if isinstance(value, int) else value
