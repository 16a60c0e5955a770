"""Embeddings: requests to /v1/embeddings, each carrying `batch_size` inputs of `input_tokens`
tokens, answered with one embedding per input in one JSON response (no stream, no output
tokens: a request's latency is the whole measurement). Rerank: requests to /v1/rerank, each
one query and `documents` documents, answered with a score per document (`RerankSource`).

The body is OpenAI's embeddings request as vLLM 0.32 takes it (`EmbeddingCompletionRequest` in
vllm/entrypoints/pooling/embed/protocol.py, `encoding_format` in
vllm/entrypoints/pooling/base/protocol.py;
https://platform.openai.com/docs/api-reference/embeddings/create): `input` a list of token-id
lists (exact lengths for any tokenizer) or of strings, and `encoding_format` "base64", what
OpenAI's Python client asks for when not told (`prepare_embedding_request` in
src/openai/lib/_parsing/_embeddings.py of https://github.com/openai/openai-python): each vector
comes back as base64 floats rather than JSON numbers, as a production client receives it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from pytest_llmperf.errors import InputError
from pytest_llmperf.records import Request
from pytest_llmperf.workloads import prompts
from pytest_llmperf.workloads.source import PromptFormat, Source

__all__ = ["EmbeddingsSource", "RerankSource", "embeddings_request"]

ENCODING_FORMAT = "base64"


@dataclass(frozen=True, kw_only=True)
class EmbeddingsSource(Source):
    """Request i embeds `batch_size` prompts of `input_tokens` random tokens each."""

    input_tokens: int
    batch_size: int = 1
    prompt_format: PromptFormat = "token_ids"

    def __post_init__(self) -> None:
        for name in ("input_tokens", "batch_size"):
            value = getattr(self, name)
            if not (isinstance(value, int) and value >= 1):
                raise InputError(f"Workload.embeddings: {name} must be a whole number >= 1, "
                                 f"got {value!r}")

    def requests(self, n: int, tokenizer: Any, rng: np.random.Generator) -> list[Request]:
        lengths = [self.input_tokens] * (n * self.batch_size)
        texts = (prompts.text_prompts(lengths, tokenizer, rng) if self.prompt_format == "text"
                 else prompts.token_id_prompts(lengths, tokenizer, rng))
        batches = [texts[i * self.batch_size:(i + 1) * self.batch_size] for i in range(n)]
        return [embeddings_request(batch, self.input_tokens * self.batch_size)
                for batch in batches]


def embeddings_request(inputs: list[Any], prompt_tokens: int) -> Request:
    """One /v1/embeddings request for `inputs` (token-id tuples or text); its `prompt` is the
    first input, its `output_tokens` 0 (an embedding generates none)."""
    field = [str(text) if isinstance(text, str) else list(text) for text in inputs]
    first = inputs[0]
    return Request(prompt=str(first) if isinstance(first, str) else first,
                   prompt_tokens=prompt_tokens, output_tokens=0, forced_length=False,
                   body=(("input", field), ("encoding_format", ENCODING_FORMAT)))


@dataclass(frozen=True, kw_only=True)
class RerankSource(Source):
    """Request i asks /v1/rerank to rank `documents` texts of `document_tokens` tokens against
    one query of `query_tokens` (vLLM's `RerankRequest`, vllm/entrypoints/pooling/scoring/
    protocol.py: `query` and `documents` are text, never token ids, so the prompts are texts of
    exact length in the model's tokenizer). `top_n` is left at 0, every document ranked."""

    query_tokens: int
    documents: int
    document_tokens: int
    prompt_format: PromptFormat = "text"

    def __post_init__(self) -> None:
        for name in ("query_tokens", "documents", "document_tokens"):
            value = getattr(self, name)
            if not (isinstance(value, int) and value >= 1):
                raise InputError(f"Workload.rerank: {name} must be a whole number >= 1, "
                                 f"got {value!r}")

    def requests(self, n: int, tokenizer: Any, rng: np.random.Generator) -> list[Request]:
        queries = prompts.text_prompts([self.query_tokens] * n, tokenizer, rng)
        documents = prompts.text_prompts([self.document_tokens] * (n * self.documents),
                                         tokenizer, rng)
        per = self.documents
        return [Request(prompt=str(query), output_tokens=0, forced_length=False,
                        prompt_tokens=self.query_tokens + per * self.document_tokens,
                        body=(("query", str(query)),
                              ("documents", [str(d) for d in documents[i * per:(i + 1) * per]])))
                for i, query in enumerate(queries)]
