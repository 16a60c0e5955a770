"""/v1/embeddings and /v1/rerank: the request body, and the response read into one
RequestRecord.

A pooling response is one JSON document, not a stream: the record gets one "chunk", timed at
the read that completed the body, carrying no generated tokens, so its E2EL (and its TTFT, the
same instant) is the request's latency, and the server's `usage.prompt_tokens` its input
tokens. An embeddings response is complete when it holds one non-empty embedding per input sent
(OpenAI's `data[].embedding`, `usage`, which vLLM 0.32 sends: `EmbeddingResponse` in
vllm/entrypoints/pooling/embed/protocol.py); a rerank response when it ranks every document
sent, each once (`results[].index`, `relevance_score`: `RerankResponse` in
vllm/entrypoints/pooling/scoring/protocol.py, the shape of Jina's and Cohere's rerank APIs).
Anything else fails the request (`invalid_output`, `malformed`), never counted as done.
"""

from __future__ import annotations

from typing import Any

import msgspec

from pytest_llmperf.client.request_apis import serves
from pytest_llmperf.failures import INVALID_OUTPUT, MALFORMED
from pytest_llmperf.records import EMBEDDINGS, RERANK, Request, RequestRecord

__all__ = ["EmbeddingsResponse", "embeddings_body", "input_count", "rerank_body"]

SHOWN_BYTES = 200  # of a body that is not an embeddings response, in the failure's line


class _Item(msgspec.Struct):
    embedding: str | list[float] = ""


class _Usage(msgspec.Struct):
    prompt_tokens: int | None = None
    completion_tokens: int | None = None


class _Response(msgspec.Struct):
    data: list[_Item]
    usage: _Usage | None = None


class _Ranked(msgspec.Struct):
    index: int
    relevance_score: float


class _Ranking(msgspec.Struct):
    results: list[_Ranked]
    usage: _Usage | None = None


_decode = msgspec.json.Decoder(_Response).decode
_decode_ranking = msgspec.json.Decoder(_Ranking).decode


def input_count(request: Request) -> int:
    """How many inputs `request` asks to embed or rank: its `input` (or `documents`) field's
    length, else 1 (its prompt)."""
    body = dict(request.body)
    found = body.get("documents", body.get("input"))
    return len(found) if isinstance(found, list) else 1


def rerank_body(model: str, request: Request,
                extra: tuple[tuple[str, Any], ...] = ()) -> dict[str, Any]:
    """The request's body: its query and documents (workloads/embeddings.py puts them there)."""
    return {"model": model, **dict(request.body), **dict(extra)}


def embeddings_body(model: str, request: Request,
                    extra: tuple[tuple[str, Any], ...] = ()) -> dict[str, Any]:
    """The request's body: its own fields (workloads/embeddings.py puts its inputs there), else
    its prompt as the one input."""
    prompt = request.prompt
    body: dict[str, Any] = {"model": model,
                            "input": [prompt if isinstance(prompt, str) else list(prompt)]}
    body.update(request.body)
    body.update(dict(extra))
    return body


class EmbeddingsResponse:
    """The body sink of one response (http1.BodySink): it keeps the bytes and the time of the
    last read; `judge` reads them once the response has ended. `rerank`: a /v1/rerank response
    ranking `inputs` documents."""

    __slots__ = ("record", "inputs", "rerank", "coalesced", "_body", "_last_read_s")

    def __init__(self, record: RequestRecord, inputs: int, rerank: bool = False) -> None:
        self.record = record
        self.inputs = inputs
        self.rerank = rerank
        # vLLM counts each input as a request; a rerank on an embedding model embeds the query
        # and each document apart (BiEncoderIOProcessor, vllm/entrypoints/pooling/scoring/
        # io_processor.py), one more than its documents.
        record.engine_requests = inputs + 1 if rerank else inputs
        self.coalesced = 0  # the client adds it to its count of coalesced token chunks
        self._body = bytearray()
        self._last_read_s: float | None = None

    def feed_reads(self, body: bytes, ends: list[int], stamps: list[float]) -> None:
        self._body += body
        if stamps:
            self._last_read_s = stamps[-1]

    def judge(self) -> None:
        """Fill the record from the complete body, or fail it naming what is wrong."""
        record = self.record
        try:
            response = (_decode_ranking if self.rerank else _decode)(self._body)
        except msgspec.DecodeError as exc:
            shown = bytes(self._body[:SHOWN_BYTES])
            noun = "a rerank" if self.rerank else "an embeddings"
            record.error, record.error_kind = (f"not {noun} response ({exc}): {shown!r}",
                                               MALFORMED)
            return
        problem = (_ranking_problem(response, self.inputs) if self.rerank
                   else _embeddings_problem(response, self.inputs))
        if problem:
            record.error, record.error_kind = problem, INVALID_OUTPUT
            return
        if response.usage is not None:
            record.usage_prompt_tokens = response.usage.prompt_tokens
            record.usage_output_tokens = response.usage.completion_tokens or 0
        record.chunk_times_s.append(self._last_read_s if self._last_read_s is not None
                                    else record.done_s)
        record.chunk_tokens.append(0)


def _embeddings_problem(response: _Response, inputs: int) -> str | None:
    sizes = [len(item.embedding) for item in response.data]
    if len(sizes) != inputs or 0 in sizes:
        return (f"the response holds {len(sizes)} embeddings ({sizes.count(0)} empty) for "
                f"{inputs} inputs")
    return None


def _ranking_problem(response: _Ranking, documents: int) -> str | None:
    ranked = sorted(item.index for item in response.results)
    if ranked != list(range(documents)):
        return (f"the response ranks {len(ranked)} documents ({len(set(ranked))} distinct "
                f"indexes) of the {documents} sent")
    return None


def _judged(client: Any, record: RequestRecord, response: EmbeddingsResponse) -> None:
    response.judge()  # one JSON document, read whole


serves(EMBEDDINGS,
       lambda client, request: embeddings_body(client.model, request, client.options.extra_body),
       lambda client, record, request: EmbeddingsResponse(record, input_count(request)),
       _judged)
serves(RERANK,
       lambda client, request: rerank_body(client.model, request, client.options.extra_body),
       lambda client, record, request: EmbeddingsResponse(record, input_count(request),
                                                          rerank=True),
       _judged)
